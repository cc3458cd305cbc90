"""What the text-LLM architectures share: the checkpoint's causal LM through transformers in
float32 (the reference every exported graph and artifact is checked against), its export
through the shared decoder, and random-weight checkpoints with a locally trained tokenizer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import CHATML_TEMPLATE, SPECIAL_TOKENS, save_random_checkpoint, seed_everything, train_tokenizer
from omni_edge.export.corpus import stdlib_corpus
from omni_edge.export.decoder.export import checked, export_decoder_lm
from omni_edge.export.options import LlmExportOptions


def load_causal_lm(checkpoint: Path, model_types: tuple[str, ...]) -> Any:
    """The checkpoint's causal LM (eval, float32), or a ValueError saying why it is not one."""
    import torch
    from transformers import AutoModelForCausalLM

    for name in ("config.json", "tokenizer.json"):  # before transformers mistakes a missing path for a hub id
        if not (checkpoint / name).is_file():
            raise ValueError(f"{checkpoint}: not a checkpoint directory (no {name})")
    model: Any = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
    if model.config.model_type not in model_types:
        raise ValueError(f"{checkpoint}: model_type {model.config.model_type!r} is not supported ({', '.join(model_types)})")
    return model.eval()


def export_causal_lm(checkpoint: Path, out: Path, opts: LlmExportOptions, model_types: tuple[str, ...]) -> list[Path]:
    """Every requested format; the plans (the first is also OUT/plan.json)."""
    opts = checked(opts)  # refuse before the model loads
    return export_decoder_lm(load_causal_lm(checkpoint, model_types), checkpoint, out, opts)


@dataclass(frozen=True)
class ChatTokens:
    """A chat vocabulary's special tokens (they take a trained tokenizer's last ids) and template."""

    specials: tuple[str, ...]
    bos: str
    eos: str
    pad: str
    template: str
    bos_before_text: bool = False  # the post-processor puts `bos` before every encoded text (Llama 3)


CHATML = ChatTokens(SPECIAL_TOKENS, "<|endoftext|>", "<|im_end|>", SPECIAL_TOKENS[0], CHATML_TEMPLATE)
# Llama 3's chat markers and a template of Llama 3.0's form (bos, header-wrapped roles, trimmed
# contents, <|eot_id|> ends a turn): what the controller's llama3 chat format renders.
LLAMA3 = ChatTokens(("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
                    "<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>",
                    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
                    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
                    bos_before_text=True)


def make_random_checkpoint(out: Path, config: Any, record: dict[str, Any], tokenizer_vocab: int, seed: int,
                           chat: ChatTokens = CHATML) -> Path:
    """A checkpoint of `config`'s architecture with random weights and a tokenizer of
    `tokenizer_vocab` ids trained on the offline corpus, with `chat`'s special tokens (the last
    ids, so config.vocab_size must be at least that) and chat template."""
    import torch
    from transformers import AutoModelForCausalLM

    seed_everything(seed)
    tokenizer = train_tokenizer(stdlib_corpus(), tokenizer_vocab, chat.specials)
    if chat.bos_before_text:  # as Llama 3's releases write it (transformers keeps a post-processor it is given)
        from tokenizers import processors

        bos = (chat.bos, tokenizer.token_to_id(chat.bos))
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{chat.bos} $A", pair=f"{chat.bos} $A {chat.bos} $B:1", special_tokens=[bos])])
    config.bos_token_id, config.eos_token_id = tokenizer.token_to_id(chat.bos), tokenizer.token_to_id(chat.eos)
    model: Any = AutoModelForCausalLM.from_config(config).float().eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():  # transformers starts biases at zero: random ones, so a dropped bias shows
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.normal_(0.0, 0.1)
    model.generation_config.do_sample = False
    tokens = {"eos_token": chat.eos, "pad_token": chat.pad} | ({"bos_token": chat.bos} if "bos_token" in chat.template else {})
    save_random_checkpoint(out, model, tokenizer, record, **tokens)
    (out / "chat_template.jinja").write_text(chat.template)
    return out
