#!/usr/bin/env python3
"""Makes tests/fixtures/images: a few tiny images (different aspect ratios, a PNG with alpha, a
grayscale JPEG, an RGB JPEG, a lossless WebP with alpha) and what transformers' Qwen2-VL / Qwen3-VL
image processor (Qwen2VLImageProcessorPil, patch 16, merge 2, min_pixels 1024) makes of them.

The pixel values are stored as the 8-bit codes they come from: HF's value is (code / 255 - 0.5) /
0.5 (checked here, exactly, for every value) and its two temporal frames are equal (checked), so
`<name>.ref.u8` holds frame 0 of each patch, [patches][3][16][16], and `refs.json` each grid.

Needs: pillow, numpy, transformers 5.23 (no torch). Run: python3 tests/tools/make_image_preprocess_refs.py
"""
import json
import os

import numpy as np
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "images")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(34)


def photo(h, w):
    """A smooth, photo-like RGB field with some noise (so resampling has something to round)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127 + 100 * np.sin(x / 7.0) * np.cos(y / 11.0)
    g = 255 * x / max(w - 1, 1)
    b = 255 * y / max(h - 1, 1)
    img = np.stack([r, g, b], -1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


images = {}
Image.fromarray(photo(37, 50)).save(os.path.join(OUT, "wide.png"))
images["wide.png"] = None
rgba = np.concatenate([photo(64, 40), np.zeros((64, 40, 1), np.uint8)], -1)
rgba[..., 3] = np.clip(np.mgrid[0:64, 0:40][1] * 7 + np.mgrid[0:64, 0:40][0] * 2, 0, 255)
rgba[:8, :8, 3] = 0
rgba[-8:, -8:, 3] = 255
Image.fromarray(rgba, "RGBA").save(os.path.join(OUT, "alpha.png"))
images["alpha.png"] = None
Image.fromarray(photo(30, 45)[..., 1]).save(os.path.join(OUT, "gray.jpg"), quality=85)
images["gray.jpg"] = None
Image.fromarray(photo(33, 70)).save(os.path.join(OUT, "color.jpg"), quality=90)
images["color.jpg"] = None
Image.fromarray(rgba[:50, :33], "RGBA").save(os.path.join(OUT, "tall.webp"), lossless=True)
images["tall.webp"] = None

proc = Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                                image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                                size={"shortest_edge": 1024, "longest_edge": 65536})
refs = {}
for name in images:
    out = proc(images=[Image.open(os.path.join(OUT, name))], return_tensors="np")
    pv = np.asarray(out["pixel_values"], dtype=np.float32)
    t, gh, gw = (int(v) for v in out["image_grid_thw"][0])
    patches = pv.reshape(gh * gw, 3, 2, 16, 16)
    assert np.array_equal(patches[:, :, 0], patches[:, :, 1])
    codes = np.rint((patches[:, :, 0].astype(np.float64) * 0.5 + 0.5) * 255).astype(np.int64)
    assert codes.min() >= 0 and codes.max() <= 255
    back = ((codes.astype(np.float64) * (1 / 255)).astype(np.float32) - np.float32(0.5)) / np.float32(0.5)
    assert np.array_equal(back.astype(np.float32), patches[:, :, 0]), name
    codes.astype(np.uint8).tofile(os.path.join(OUT, name + ".ref.u8"))
    w, h = Image.open(os.path.join(OUT, name)).size
    refs[name] = {"grid_h": gh, "grid_w": gw, "width": w, "height": h}
    print(name, (w, h), "->", (gw * 16, gh * 16), "grid", gh, gw)
with open(os.path.join(OUT, "refs.json"), "w") as f:
    json.dump({"processor": "Qwen2VLImageProcessorPil (transformers 5.23.0)", "patch": 16,
               "merge": 2, "temporal": 2, "min_pixels": 1024, "max_pixels": 65536,
               "images": refs}, f, indent=1)
