"""What a transform is: :class:`Transform` (one edit of a request record), :class:`Chain` (several in
order) and :func:`apply_transforms` (records through transforms).

>>> from promptkit.whatif.transforms import PinModel, SortTools
>>> Chain((PinModel("m"), SortTools())).describe()
'pin the model to m; then sort tool definitions by name and JSON keys'
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from promptkit.layout import (
    RequestRecord,
)

__all__ = ["Chain", "Transform", "apply_transforms"]


def _transforms(value: Iterable[Transform]) -> tuple[Transform, ...]:
    return tuple(value)


class Transform(abc.ABC):
    """One edit of a request record. Subclasses are frozen attrs classes.

    ``apply(record)`` returns the edited copy (the record itself when nothing applies);
    ``describe()`` says in one line what the transform does; ``after_options()`` are analysis options
    the *after* analysis of a replay must use (e.g. another cache model), empty for most transforms.
    """

    __slots__ = ()

    @abc.abstractmethod
    def apply(self, record: RequestRecord) -> RequestRecord:
        """The edited record."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One readable line: what the transform does."""

    def after_options(self) -> dict[str, Any]:
        """Analysis options the replay's *after* analysis needs (none by default)."""
        return {}

    def __call__(self, record: RequestRecord) -> RequestRecord:
        return self.apply(record)


def apply_transforms(
    records: Iterable[RequestRecord], transforms: Sequence[Transform]
) -> list[RequestRecord]:
    """Every record through every transform, in order (one output record per input record).

    >>> from promptkit.whatif.transforms import PinModel
    >>> r = RequestRecord({"model": "a", "messages": [{"role": "user", "content": "hi"}]}, session="s")
    >>> [x.request["model"] for x in apply_transforms([r, r], [PinModel("b")])]
    ['b', 'b']
    """
    out = []
    for record in records:
        for t in transforms:
            record = t.apply(record)
        out.append(record)
    return out


@attrs.frozen(slots=True)
class Chain(Transform):
    """Several transforms applied in order.

    >>> from promptkit.whatif.transforms import PinModel, SortTools
    >>> Chain((PinModel("gpt-4.1"), SortTools())).describe()
    'pin the model to gpt-4.1; then sort tool definitions by name and JSON keys'
    """

    transforms: tuple[Transform, ...] = attrs.field(converter=_transforms)

    def apply(self, record: RequestRecord) -> RequestRecord:
        for t in self.transforms:
            record = t.apply(record)
        return record

    def describe(self) -> str:
        return "; then ".join(t.describe() for t in self.transforms) or "no change"

    def after_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for t in self.transforms:
            out.update(t.after_options())
        return out
