"""promptkit: build LLM chat requests that keep a provider's prefix cache hitting, and measure it.

The public API is re-exported here and imported lazily, so ``import promptkit`` stays cheap:
polars, matplotlib and the tokenizers load only when the cache analysis is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


_export(
    "promptkit.schema.message",
    "Message",
    "ToolCall",
    "ContentSegment",
    "MessageFormatError",
    "WellKnownKinds",
    "WellKnownMetadataKeys",
    "WellKnownRole",
    "WELL_KNOWN_ROLES",
    "CONTROL_KINDS",
    "DIRECTIVE_KINDS",
    "to_openai_dict",
    "from_openai_dict",
    "is_directive",
)
_export(
    "promptkit.egress",
    "to_llm_role",
    "prepare_llm_messages",
    "CUSTOM_ROLE_MAP",
    "KIND_PREFIX",
    "CUSTOM_ROLE_PREFIX",
    "well_formed",
)
_export(
    "promptkit.schema.attachments",
    "AttachmentRefKind",
    "ATTACHMENT_REF_KINDS",
    "AttachmentRef",
    "format_attachment_ref",
    "parse_attachment_refs",
    "build_attachment_ref_matcher",
    "AttachmentRefError",
    "sanitize_desc",
)
_export(
    "promptkit.schema.mentions",
    "format_at",
    "format_at_self",
    "format_at_all",
    "CQSegment",
    "parse_cq_segments",
    "render_cq_segments",
    "normalize_cq_message",
    "AT_SELF_PATTERN",
    "check_immediate_mention",
    "extract_mentions",
    "escape_markup",
    "split_markup_text",
    "MarkupError",
    "MENTION_PATTERN",
)
_export(
    "promptkit.schema.identity",
    "get_sender_label",
    "prefix_sender",
    "strip_sender_prefix",
    "get_message_name",
)
_export(
    "promptkit.schema.platform",
    "IncomingMessage",
    "OutgoingMessage",
    "ForwardedChat",
    "ForwardFacts",
    "FromTurn",
    "ReplyTo",
    "HostNotice",
    "MessageAttachment",
    "build_incoming_content",
    "forward_placeholder",
    "with_forwards",
    "outbound_media_message",
    "outbound_marker_message",
    "one_speaker",
    "was_addressed",
    "arrival_tag",
    "Actor",
    "ModelInfo",
    "PlatformMessageError",
    "TRIGGER_TYPES",
)
_export(
    "promptkit.schema.history",
    "group_tool_calls",
    "MessageUnit",
    "drop_control_kinds",
    "history_for_model",
)
_export(
    "promptkit.assembly",
    "Anchor",
    "VOLATILE_INJECTOR",
    "PromptRegistry",
    "PromptView",
    "AssembledPrompt",
    "LayoutEntry",
    "trim_to_budget",
    "TrimResult",
    "audit",
    "turn_frame",
    "layout_of",
    "FOCUS_INJECTOR",
    "LayoutFormatError",
)
_export(
    "promptkit.providers",
    "openai_request",
    "deepseek_request",
    "ollama_request",
    "anthropic_request",
    "normalize_system_placement",
    "request_record",
    "write_jsonl",
    "RequestBuildError",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "MediaFormatError",
    "ContentNotSentWarning",
)
_export(
    "promptkit.cache",
    "analyze",
    "analyze_requests",
    "AnalysisResult",
    "get_tokenizer",
    "get_render_model",
    "get_cache_model",
)
_export("promptkit.formats", "read_logs", "records_from_requests", "available_formats")
_export("promptkit.layout", "RequestRecord", "LoadResult", "LoadProblem", "Usage")
_export("promptkit.errors", "PromptkitError", "LogFileError", "RecordFormatError")
_export("promptkit.providers.registry", "get_provider", "available_providers", "infer_provider")
_export("promptkit.providers.pricing", "ModelPrice")
_export(
    "promptkit.cache.report",
    "summarize",
    "format_summary",
    "cost_summary",
    "largest_breaks",
)
_export("promptkit.cache.plots", "plot_hit_ratio", "plot_composition", "plot_predicted_vs_reported")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'promptkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers and IDEs
    from promptkit.assembly import (
        FOCUS_INJECTOR as FOCUS_INJECTOR,
        VOLATILE_INJECTOR as VOLATILE_INJECTOR,
        Anchor as Anchor,
        AssembledPrompt as AssembledPrompt,
        LayoutEntry as LayoutEntry,
        LayoutFormatError as LayoutFormatError,
        PromptRegistry as PromptRegistry,
        PromptView as PromptView,
        TrimResult as TrimResult,
        audit as audit,
        layout_of as layout_of,
        trim_to_budget as trim_to_budget,
        turn_frame as turn_frame,
    )
    from promptkit.cache import (
        AnalysisResult as AnalysisResult,
        analyze as analyze,
        analyze_requests as analyze_requests,
        get_cache_model as get_cache_model,
        get_render_model as get_render_model,
        get_tokenizer as get_tokenizer,
    )
    from promptkit.cache.plots import (
        plot_composition as plot_composition,
        plot_hit_ratio as plot_hit_ratio,
        plot_predicted_vs_reported as plot_predicted_vs_reported,
    )
    from promptkit.cache.report import (
        cost_summary as cost_summary,
        format_summary as format_summary,
        largest_breaks as largest_breaks,
        summarize as summarize,
    )
    from promptkit.egress import (
        CUSTOM_ROLE_MAP as CUSTOM_ROLE_MAP,
        CUSTOM_ROLE_PREFIX as CUSTOM_ROLE_PREFIX,
        KIND_PREFIX as KIND_PREFIX,
        prepare_llm_messages as prepare_llm_messages,
        to_llm_role as to_llm_role,
        well_formed as well_formed,
    )
    from promptkit.errors import (
        LogFileError as LogFileError,
        PromptkitError as PromptkitError,
        RecordFormatError as RecordFormatError,
    )
    from promptkit.formats import (
        available_formats as available_formats,
        read_logs as read_logs,
        records_from_requests as records_from_requests,
    )
    from promptkit.layout import (
        LoadProblem as LoadProblem,
        LoadResult as LoadResult,
        RequestRecord as RequestRecord,
        Usage as Usage,
    )
    from promptkit.providers import (
        ContentNotSentWarning as ContentNotSentWarning,
        MediaFormatError as MediaFormatError,
        RequestBuildError as RequestBuildError,
        ToolArgumentsError as ToolArgumentsError,
        ToolDefinitionError as ToolDefinitionError,
        anthropic_request as anthropic_request,
        deepseek_request as deepseek_request,
        normalize_system_placement as normalize_system_placement,
        ollama_request as ollama_request,
        openai_request as openai_request,
        request_record as request_record,
        write_jsonl as write_jsonl,
    )
    from promptkit.providers.pricing import ModelPrice as ModelPrice
    from promptkit.providers.registry import (
        available_providers as available_providers,
        get_provider as get_provider,
        infer_provider as infer_provider,
    )
    from promptkit.schema.attachments import (
        ATTACHMENT_REF_KINDS as ATTACHMENT_REF_KINDS,
        AttachmentRef as AttachmentRef,
        AttachmentRefError as AttachmentRefError,
        AttachmentRefKind as AttachmentRefKind,
        build_attachment_ref_matcher as build_attachment_ref_matcher,
        format_attachment_ref as format_attachment_ref,
        parse_attachment_refs as parse_attachment_refs,
        sanitize_desc as sanitize_desc,
    )
    from promptkit.schema.history import (
        MessageUnit as MessageUnit,
        drop_control_kinds as drop_control_kinds,
        group_tool_calls as group_tool_calls,
        history_for_model as history_for_model,
    )
    from promptkit.schema.identity import (
        get_message_name as get_message_name,
        get_sender_label as get_sender_label,
        prefix_sender as prefix_sender,
        strip_sender_prefix as strip_sender_prefix,
    )
    from promptkit.schema.mentions import (
        AT_SELF_PATTERN as AT_SELF_PATTERN,
        MENTION_PATTERN as MENTION_PATTERN,
        CQSegment as CQSegment,
        MarkupError as MarkupError,
        check_immediate_mention as check_immediate_mention,
        escape_markup as escape_markup,
        extract_mentions as extract_mentions,
        format_at as format_at,
        format_at_all as format_at_all,
        format_at_self as format_at_self,
        normalize_cq_message as normalize_cq_message,
        parse_cq_segments as parse_cq_segments,
        render_cq_segments as render_cq_segments,
        split_markup_text as split_markup_text,
    )
    from promptkit.schema.message import (
        CONTROL_KINDS as CONTROL_KINDS,
        DIRECTIVE_KINDS as DIRECTIVE_KINDS,
        WELL_KNOWN_ROLES as WELL_KNOWN_ROLES,
        ContentSegment as ContentSegment,
        Message as Message,
        MessageFormatError as MessageFormatError,
        ToolCall as ToolCall,
        WellKnownKinds as WellKnownKinds,
        WellKnownMetadataKeys as WellKnownMetadataKeys,
        WellKnownRole as WellKnownRole,
        from_openai_dict as from_openai_dict,
        is_directive as is_directive,
        to_openai_dict as to_openai_dict,
    )
    from promptkit.schema.platform import (
        TRIGGER_TYPES as TRIGGER_TYPES,
        Actor as Actor,
        ForwardedChat as ForwardedChat,
        ForwardFacts as ForwardFacts,
        FromTurn as FromTurn,
        HostNotice as HostNotice,
        IncomingMessage as IncomingMessage,
        MessageAttachment as MessageAttachment,
        ModelInfo as ModelInfo,
        OutgoingMessage as OutgoingMessage,
        PlatformMessageError as PlatformMessageError,
        ReplyTo as ReplyTo,
        arrival_tag as arrival_tag,
        build_incoming_content as build_incoming_content,
        forward_placeholder as forward_placeholder,
        one_speaker as one_speaker,
        outbound_marker_message as outbound_marker_message,
        outbound_media_message as outbound_media_message,
        was_addressed as was_addressed,
        with_forwards as with_forwards,
    )
