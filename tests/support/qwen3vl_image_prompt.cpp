#include "qwen3vl_image_prompt.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/session.h"

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

std::vector<float> image_prompt_logits(Engine& engine, const Qwen3VlImagePrompt& p, bool decode) {
  const ImageRows rows(p.ids, p.image_token, {p.image}, engine.cfg().n_embd,
                       engine.cfg().n_deepstack);
  const int64_t n = static_cast<int64_t>(p.ids.size()), V = engine.cfg().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n * V));
  Session s(engine);
  const int64_t head = decode ? p.vision_end_row + 1 : n;
  s.feed(p.ids.data(), head, logits.data(), true, rows.inputs());
  for (int64_t i = head; i < n; ++i)
    s.feed(&p.ids[static_cast<size_t>(i)], 1, &logits[static_cast<size_t>(i * V)], false);
  return logits;
}

}  // namespace ts::test
