#include "server/generation.h"

#include <random>
#include <utility>

#include "constrain/tool_calls.h"
#include "core/error.h"
#include "server/access_log.h"
#include "server/chat_prompt.h"
#include "text/harmony.h"

namespace ts::server {

uint64_t random_seed() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

std::vector<int32_t> request_prompt(const GenerationContext& ctx, const ApiRequest& a,
                                    bool& thinking_open, std::string* channel, GenRequest* images) {
  if (a.kind == ApiKind::Chat) {
    if (!ctx.chat) fail(ErrorKind::Input, ctx.no_chat);
    const std::string text = chat_prompt_text(*ctx.chat, a);
    thinking_open = prompt_opens_thinking(text);
    if (channel != nullptr && ctx.chat->harmony()) *channel = harmony_open_channel(text);
    // A required call: the answer opens with the marker, so the model writes only the call.
    const std::string opening =
        a.tool_required ? required_call_opening(*chat_tools(*ctx.chat, a)) : "";
    if (!a.images.empty()) {
      if (images == nullptr) fail(ErrorKind::Input, "images are not taken here");
      ImagePrompt p = image_prompt(text + opening, a.images, a.image_urls, ctx.tok,
                                   ctx.tok.add_bos(), ctx.vision);
      images->images = std::move(p.rows);
      images->first_image_row = p.first_image_row;
      return std::move(p.ids);
    }
    return ctx.tok.encode(text + opening, ctx.tok.add_bos(), true);
  }
  if (!a.prompt_tokens.empty()) return a.prompt_tokens;
  // As `turbospark run` does: the text is the user's, control-token spellings in it stay text.
  return ctx.tok.encode(a.prompt_text, ctx.tok.add_bos(), false);
}

Generation start_generation(const GenerationContext& ctx, const ApiRequest& a) {
  if (!a.model.empty() && a.model != ctx.model_id)
    throw RouteError{
        404,
        "the model '" + a.model + "' does not exist: this server serves '" + ctx.model_id + "'",
        "invalid_request_error", "model_not_found"};
  if (const std::string why = ctx.sched.cannot_generate(); !why.empty())
    throw RouteError{400, why, "invalid_request_error", ""};
  GenRequest g;
  Generation out;
  // The prompts' tokens: one, or each of a completion's list of prompts.
  std::vector<std::vector<int32_t>> prompts;
  try {
    if (a.prompt_list.empty()) {
      prompts.push_back(request_prompt(ctx, a, out.thinking_open, &out.channel, &g));
    } else {
      ApiRequest one = a;
      for (const ApiRequest::Prompt& p : a.prompt_list) {
        one.prompt_text = p.text;
        one.prompt_tokens = p.tokens;
        prompts.push_back(request_prompt(ctx, one, out.thinking_open));
      }
    }
  } catch (const Error& e) {
    throw RouteError{400, e.what(), "invalid_request_error", ""};
  }
  for (const auto& p : prompts) out.prompt_tokens += static_cast<int64_t>(p.size());
  out.harmony = a.kind == ApiKind::Chat && ctx.chat->harmony();
  out.split_reasoning = a.kind == ApiKind::Chat && (ctx.chat->thinks() || out.harmony);
  g.max_tokens = a.max_tokens;
  g.ignore_eos = a.ignore_eos;
  g.cache_prompt = a.cache_prompt;
  g.stop = a.stop;
  g.sampling = a.sampling;
  g.json = a.json;
  g.tools = a.kind == ApiKind::Chat ? chat_tools(*ctx.chat, a) : nullptr;
  g.tool_required = a.tool_required;
  g.reasoning_budget =
      a.kind == ApiKind::Chat ? a.reasoning_budget.value_or(ctx.reasoning_budget) : -1;
  g.reasoning_open = out.thinking_open || out.channel == "analysis";
  g.sampling.seed = a.seed ? *a.seed : random_seed();
  g.top_logprobs = a.top_logprobs;
  for (size_t k = 0; k < prompts.size() * static_cast<size_t>(a.n); ++k) {
    const size_t i = k % static_cast<size_t>(a.n);
    GenRequest gi = g;
    gi.prompt = prompts[k / static_cast<size_t>(a.n)];
    gi.sampling.seed = g.sampling.seed + static_cast<uint64_t>(i);
    std::shared_ptr<Job> job;
    try {
      job = ctx.sched.submit(std::move(gi));
    } catch (const Error& e) {
      out.cancel_all();
      if (e.kind() == ErrorKind::Runtime) throw RouteError{503, e.what(), "server_error", ""};
      throw RouteError{400, e.what(), "invalid_request_error", ""};
    }
    if (job == nullptr) {
      out.cancel_all();
      throw RouteError{503,
                       "the server is busy: " + std::to_string(ctx.sched.options().queue_capacity) +
                           " requests are already waiting for a slot; retry later",
                       "server_error", "queue_full"};
    }
    out.jobs.push_back(std::move(job));
  }
  return out;
}

std::unique_ptr<AnswerSplitter> answer_splitter(const Generation& gen) {
  if (!gen.split_reasoning) return nullptr;
  if (gen.harmony) return std::make_unique<HarmonySplitter>(gen.channel);
  return std::make_unique<ReasoningSplitter>(gen.thinking_open);
}

AnswerReader::AnswerReader(std::shared_ptr<Job> job, const Generation& gen)
    : job_(std::move(job)),
      split_(answer_splitter(gen)),
      start_(std::chrono::steady_clock::now()) {}

AnswerSplitter::Parts AnswerReader::take(std::chrono::milliseconds wait) {
  AnswerSplitter::Parts out;
  if (done_) return out;
  JobUpdate u = job_->take(wait);
  const auto us = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 start_)
        .count();
  };
  for (const std::string& piece : u.pieces) {
    if (first_us_ == 0) first_us_ = std::max<int64_t>(1, us());
    if (split_) {
      AnswerSplitter::Parts p = split_->feed(piece);
      out.reasoning += p.reasoning;
      out.content += p.content;
    } else {
      out.content += piece;
    }
  }
  if (u.done) {
    if (split_) {
      AnswerSplitter::Parts p = split_->finish();
      out.reasoning += p.reasoning;
      out.content += p.content;
    }
    done_ = true;
    access_usage(u.usage.prompt_tokens, u.usage.completion_tokens);
    end_us_ = std::max<int64_t>(1, us());
    if (first_us_ == 0) first_us_ = end_us_;
    u.pieces.clear();
    last_ = std::move(u);
  }
  return out;
}

}  // namespace ts::server
