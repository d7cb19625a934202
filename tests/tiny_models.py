"""What the trainer tests build instead of downloading (the CI machine may not reach a hub): a
word-level tokenizer trained on the prompts it will see, with whole replies as single tokens
where a test wants generation to pick among known replies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def trained_tokenizer(texts: Sequence[str], whole: Sequence[str] = ()) -> Any:
    """A transformers fast tokenizer trained on `texts`; each of `whole` is one (non-special)
    token, so that it decodes back to itself; a plain chat template (one line per message)."""
    import tokenizers
    import transformers

    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>"])
    tok.train_from_iterator(list(texts), trainer)
    tok.add_tokens([tokenizers.AddedToken(t, normalized=False) for t in whole])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>"
    )
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    return fast
