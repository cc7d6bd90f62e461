"""Trains a SentencePiece-style BPE (byte fallback, "▁" for spaces) on the corpus and writes it
as a tokenizer.json laid out like Gemma's: Gemma 4's special-token names first, then the 256
byte tokens, then the learned pieces."""
import json

# Gemma 4's control / user-defined token names (gemma4-arch.md §4); ids here are compact.
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]",
            "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
            "<tool_response|>", '<|"|>', "<|think|>", "<|channel>", "<channel|>",
            "<|turn>", "<turn|>", "<|image>", "<|audio>", "<|image|>", "<|audio|>",
            "<image|>", "<audio|>", "<|video|>"]
PAD, EOS, BOS, UNK = 0, 1, 2, 3
# The pieces may never cross a newline-run boundary: this is the split llama.cpp's gemma4
# pre-type applies before merging, so whole-text BPE and per-chunk BPE give the same ids.
LINE_SPLIT = r"[^\n]+|\n+"


def _merges_as_pairs(merges):
    return [m.split(" ", 1) if isinstance(m, str) else list(m) for m in merges]


def train(texts, vocab_size, limit_alphabet, max_token_length):
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(LINE_SPLIT), behavior="isolated")
    n_learn = vocab_size - len(SPECIALS) - 256
    kw = dict(vocab_size=n_learn, min_frequency=2, special_tokens=[], limit_alphabet=limit_alphabet,
              show_progress=False)
    try:
        trainer = trainers.BpeTrainer(max_token_length=max_token_length, **kw)
    except TypeError:
        trainer = trainers.BpeTrainer(**kw)
    tok.train_from_iterator(texts, trainer=trainer)
    learned = json.loads(tok.to_str())["model"]
    return build_json(learned["vocab"], _merges_as_pairs(learned["merges"]))


def build_json(learned_vocab, merges):
    vocab = {}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(learned_vocab.items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [m for m in merges if m[0] in vocab and m[1] in vocab and (m[0] + m[1]) in vocab]
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [BOS], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def fast_encoder(tok_json):
    """Same vocabulary and merges, split into newline runs first (faster; identical ids) and
    with no added-token matching, so literal '<bos>' text in source stays ordinary text."""
    from tokenizers import Tokenizer
    j = json.loads(json.dumps(tok_json))
    j["added_tokens"] = []
    j["post_processor"] = None
    j["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": LINE_SPLIT}, "behavior": "Isolated",
                          "invert": False}
    return Tokenizer.from_str(json.dumps(j))


def tokenizer_config():
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
            "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>", "add_bos_token": True,
            "add_eos_token": False, "model_max_length": 4096}
