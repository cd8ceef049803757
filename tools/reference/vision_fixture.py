"""What the vision fixture scripts share: their synthetic test images and the mmproj GGUF that
llama.cpp's converter writes of their HF directory."""
import os
import subprocess
import sys

import numpy as np
from PIL import Image


def image(h, w, seed):
    """A smooth photo-like field with noise (so the resampling has something to round)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([127 + 100 * np.sin(x / 5.0) * np.cos(y / 7.0), 255 * x / (w - 1),
                    255 * y / (h - 1)], -1) + rng.normal(0, 12, (h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def convert_mmproj(hf, out, outtype="f32"):
    """llama.cpp's convert_hf_to_gguf.py --mmproj --outtype OUTTYPE of hf into out (LLAMA_CPP_DIR:
    its source folder, whose gguf-py the converter imports)."""
    llama = os.environ.get("LLAMA_CPP_DIR")
    if not llama:
        sys.exit("LLAMA_CPP_DIR: llama.cpp's source folder (convert_hf_to_gguf.py)")
    env = dict(os.environ, PYTHONPATH=os.path.join(llama, "gguf-py"))
    subprocess.run([sys.executable, os.path.join(llama, "convert_hf_to_gguf.py"), hf, "--mmproj",
                    "--outtype", outtype, "--outfile", out], check=True, env=env)
