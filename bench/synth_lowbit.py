#!/usr/bin/env python3
"""A copy of a GGUF whose every quantised matrix is random blocks of one low-bit type.

`turbospark synth` cannot write the low-bit types (it quantises random floats, and these types'
quantisers need an importance matrix and minutes a tensor); llama-quantize needs an importance
matrix of the same model for most of them. A kernel benchmark needs neither: random code bytes are
valid for every one of these types (any grid index, sign pattern or ternary byte decodes), and only
the f16 block scales need sane values, which this sets to one modest value per type.

  PYTHONPATH=<llama.cpp>/gguf-py python3 bench/synth_lowbit.py IN.gguf OUT.gguf iq2_xxs

IN is typically `turbospark synth --shape llama3.2-1b --dtype q8_0`; norms and other float tensors
are copied, metadata too (general.file_type is left as IN's).
"""
import sys

import numpy as np
import gguf

Q = gguf.GGMLQuantizationType

# Per type: byte offset of the f16 scale in its block (None: IQ1_M's scale is the top nibbles of
# four u16 at bytes 48..55), and a scale that keeps the weights around 0.02 .. 0.1.
TYPES = {
    "iq1_s": (Q.IQ1_S, 0, 0.005),
    "iq1_m": (Q.IQ1_M, None, 0.005),
    "iq2_xxs": (Q.IQ2_XXS, 0, 0.001),
    "iq2_xs": (Q.IQ2_XS, 0, 0.001),
    "iq2_s": (Q.IQ2_S, 0, 0.001),
    "iq3_xxs": (Q.IQ3_XXS, 0, 0.001),
    "iq3_s": (Q.IQ3_S, 0, 0.001),
    "tq1_0": (Q.TQ1_0, 52, 0.02),
    "tq2_0": (Q.TQ2_0, 64, 0.02),
}


def random_blocks(qtype, scale_off, scale, rows, cols, rng):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    if cols % block_elems:
        sys.exit(f"synth_lowbit: a row of {cols} is not whole {qtype.name} blocks of {block_elems}")
    blocks = rng.integers(0, 256, size=(rows * cols // block_elems, block_bytes), dtype=np.uint8)
    h = np.frombuffer(np.float16(scale).tobytes(), dtype=np.uint16)[0]
    if scale_off is None:
        for i in range(4):
            nib = (h >> (4 * i)) & 0xF
            blocks[:, 49 + 2 * i] = (blocks[:, 49 + 2 * i] & 0x0F) | (nib << 4)
    else:
        blocks[:, scale_off] = h & 0xFF
        blocks[:, scale_off + 1] = h >> 8
    return blocks.reshape(rows, -1)


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in TYPES:
        sys.exit("usage: synth_lowbit.py IN.gguf OUT.gguf " + "|".join(TYPES))
    src, dst, name = sys.argv[1:]
    qtype, scale_off, scale = TYPES[name]
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    rng = np.random.default_rng(0)
    out = []
    for t in reader.tensors:
        if t.tensor_type in (Q.F32, Q.F16, Q.BF16):
            data, raw = t.data, t.tensor_type
        else:
            cols = int(t.shape[0])
            rows = int(np.prod(t.shape[1:]))
            data, raw = random_blocks(qtype, scale_off, scale, rows, cols, rng), qtype
        writer.add_tensor_info(t.name, data.shape, data.dtype, data.nbytes, raw)
        out.append(data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in out:
        writer.write_tensor_data(data)
    writer.close()


if __name__ == "__main__":
    main()
