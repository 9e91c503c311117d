"""How a provider sees a request: its chat template (:mod:`~promptkit.tokens.render`), its tokenizer
(:mod:`~promptkit.tokens.tokenizers`), the incremental request tokenizer that turns a request body into
tokens with its message boundaries (:mod:`~promptkit.tokens.tokenize`), and the cache models that say
what of those tokens the provider stores and reads (:mod:`~promptkit.tokens.cache_models`).

These are the mechanisms a provider profile (:mod:`promptkit.providers`) builds its objects from; they
import nothing above the record contract (:mod:`promptkit.layout`), so the providers, the log formats
and the analysis all build on them. :mod:`promptkit.analysis` re-exports their public names.
"""
