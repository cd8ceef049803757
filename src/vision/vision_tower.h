// What the CLI and the server take images through: a model's vision tower (Qwen3-VL's ViT,
// Gemma 3's SigLIP or Gemma 4's), opened from an mmproj GGUF or an HF directory by what the file
// says it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/arch_config.h"
#include "vision/image_rows.h"

namespace ts {

class VisionTower {
 public:
  virtual ~VisionTower() = default;
  virtual const std::string& path() const = 0;
  virtual int64_t out_hidden() const = 0;  // the width of its features: the text model's
  virtual int64_t n_deepstack() const = 0;
  virtual ImageLayout layout() const = 0;
  virtual const char* name() const = 0;  // "Gemma 3's", for messages
  // Whether the text model takes this tower's features.
  virtual bool feeds(const ArchConfig& text) const = 0;
  // Text the processor puts on each side of an image's block of tokens (Gemma 3's "\n\n").
  virtual std::string block_margin() const { return {}; }
  // The processor's pixel bounds, 0 keeping its own. Errors (ErrorKind::Usage): bounds out of
  // range, or a tower whose images are resized to one fixed size.
  virtual void set_pixel_bounds(int64_t min_pixels, int64_t max_pixels) = 0;
  // The most tokens an image takes (Gemma 4's max_soft_tokens). Errors (ErrorKind::Usage): a
  // bound out of range, or a tower that sizes images otherwise (the default).
  virtual void set_max_tokens(int64_t max_tokens);
  // An image file's bytes: decoded, processed and encoded; its key is image_key() of the bytes.
  virtual EncodedImage encode_file(const uint8_t* data, size_t size) = 0;
};

// How a prompt's image rows go into the text model `text`: the tower's layout, or causal where
// the text model attends causally to images (ArchConfig::image_attention).
ImageLayout image_layout(const VisionTower& tower, const ArchConfig& text);

// Errors (ErrorKind::Model) name the file: a projector type or model type of no tower here.
std::unique_ptr<VisionTower> open_vision_tower(const std::string& path, int threads);

// FNV-1a over an image file's bytes: what a prompt cache tells two images apart by.
uint64_t image_key(const uint8_t* data, size_t size);

}  // namespace ts
