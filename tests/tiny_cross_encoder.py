"""A tiny, randomly initialised BERT cross-encoder saved to disk, to exercise the
local_cross_encoder code path offline. Its scores mean nothing: never claim quality."""

from __future__ import annotations

from pathlib import Path

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "for",
    "with",
    "on",
    "def",
    "class",
    "return",
    "self",
    "import",
    "from",
    "billing",
    "retry",
    "failed",
    "charge",
    "config",
    "parse",
    "load",
    "read",
    "text",
    "file",
    "server",
    "handle",
    "request",
    "vault",
    "key",
    "open",
]


def build_tiny_cross_encoder(target: Path, seed: int = 0) -> Path:
    import torch
    from transformers import (  # type: ignore[attr-defined]  # lazily exported names
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    target.mkdir(parents=True, exist_ok=True)
    vocab = target / "vocab.txt"
    vocab.write_text("\n".join(_SPECIAL + sorted(set(_WORDS))) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    torch.manual_seed(seed)
    config = BertConfig(  # type: ignore[call-arg]  # num_labels is a PretrainedConfig kwarg
        vocab_size=len(_SPECIAL) + len(set(_WORDS)),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
    )
    model = BertForSequenceClassification(config)
    model.eval()
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target
