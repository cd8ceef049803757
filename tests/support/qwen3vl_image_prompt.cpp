#include "qwen3vl_image_prompt.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_models.h"

namespace ts::test {

Qwen3VlImagePrompt load_qwen3vl_image_prompt(const std::string& fixture) {
  std::ifstream in(fixture_file(fixture, "meta.json"));
  const auto meta = nlohmann::json::parse(in);
  const auto& im = meta["image"];
  Qwen3VlImagePrompt p;
  p.ids = im["prompt_ids"].get<std::vector<int32_t>>();
  const auto thw = im["position_ids_thw"].get<std::vector<std::vector<int32_t>>>();
  for (size_t i = 0; i < p.ids.size(); ++i)
    for (int s = 0; s < 3; ++s) p.positions.push_back(thw[static_cast<size_t>(s)][i]);
  p.image_token = meta["config"]["image_token_id"].get<int32_t>();
  const int32_t vision_end = meta["config"]["vision_end_token_id"].get<int32_t>();
  for (size_t i = 0; i < p.ids.size(); ++i)
    if (p.ids[i] == vision_end) p.vision_end_row = static_cast<int64_t>(i);
  const auto grid = im["image_grid_thw"][0].get<std::vector<int64_t>>();
  p.image.grid_h = grid[1] / 2;  // the merger's 2 x 2
  p.image.grid_w = grid[2] / 2;
  p.image.embeds = read_f32_file(fixture_file(fixture, "image_embeds.f32"));
  p.image.deepstack = read_f32_file(fixture_file(fixture, "image_deepstack.f32"));
  return p;
}

}  // namespace ts::test
