#!/usr/bin/env python3
"""Splits a GGUF file with gguf-py's own writer (GGUFWriter(split_max_tensors=N)), the layout
llama.cpp's gguf-split writes: PREFIX-0000k-of-0000n.gguf, the metadata in the first part, the
split.* keys in every part. Used by tests/unit/test_gguf_split.cpp (skipped without gguf-py).

Usage: pip install gguf numpy; python3 tests/tools/split_gguf.py IN.gguf OUT_PREFIX MAX_TENSORS
Prints the path of the first part.
"""
import sys
from pathlib import Path

from gguf import GGUFReader, GGUFWriter, GGUFValueType


def main() -> None:
    src, prefix, max_tensors = sys.argv[1], sys.argv[2], int(sys.argv[3])
    r = GGUFReader(src)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    w = GGUFWriter(prefix + ".gguf", arch, split_max_tensors=max_tensors)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        t = field.types[0]
        if t == GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == GGUFValueType.STRING:
                v = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                v = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(name, v, t, sub_type=sub)
        elif t == GGUFValueType.STRING:
            w.add_key_value(name, bytes(field.parts[field.data[0]]).decode(), t)
        else:
            w.add_key_value(name, field.parts[field.data[0]].tolist()[0], t)
    for t in r.tensors:
        # The reader's array is the raw blocks (rows x row bytes) for quantised types, which the
        # writer turns back into the element shape given raw_dtype.
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(w.format_shard_names(Path(prefix + ".gguf"))[0])


if __name__ == "__main__":
    main()
