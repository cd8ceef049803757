"""What the fixtures with a tiny byte-level BPE vocabulary share (tests/tools/
make_glm4_moe_fixture.py, make_qwen3_vl_moe_fixture.py): the vocabulary, trained on their prompt
with the family's special tokens, and llama.cpp's text converter told which known pre-tokenizer it
stands for (the tiny vocabulary's hash is unknown to it)."""
import os
import runpy
import sys


def make_tokenizer(out_dir, text, specials, vocab):
    """A `vocab`-entry byte-level BPE trained on `text`, `specials` first (the first one the end of
    text token), saved to out_dir as transformers saves a fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False)
    tok.train_from_iterator([text] * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=specials[0],
                                   additional_special_tokens=specials[1:])
    fast.save_pretrained(out_dir)
    return fast


def convert_text(converter, hf_dir, out_file, pre_tokenizer):
    """llama.cpp's convert_hf_to_gguf.py --outtype f32 of hf_dir (converter: its source folder),
    the vocabulary's pre-tokenizer taken to be `pre_tokenizer`."""
    sys.path.insert(0, converter)
    sys.path.insert(1, os.path.join(converter, "gguf-py"))
    from conversion.base import TextModel
    TextModel.get_vocab_base_pre = lambda self, tokenizer: pre_tokenizer
    script = os.path.join(converter, "convert_hf_to_gguf.py")
    argv = sys.argv
    sys.argv = [script, hf_dir, "--outtype", "f32", "--outfile", out_file]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.argv = argv
