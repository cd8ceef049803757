#include "cli/serve_memory.h"

#include <algorithm>
#include <string>

#include "core/checked.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "runtime/footprint.h"

namespace ts::cli {
namespace {

double mib(uint64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

// A slot's state: its KV rows and, for a hybrid model, its recurrent state and checkpoints.
uint64_t slot_kv_bytes(const ModelSpec& spec, int64_t ctx, DType kv_type, int64_t checkpoints) {
  FootprintRequest req;
  req.ctx = ctx;
  req.kv_type = kv_type;
  req.prefill_batch = 1;
  req.state_checkpoints = checkpoints;
  const Footprint f = compute_footprint(spec, req);
  return checked_add(f.kv_cache, f.recurrent_state, "slot state");
}

// Per slot: the logits of a step (1 + lookup rows) and of the last prompt (one row), as floats.
uint64_t slot_logits_bytes(const ModelSpec& spec, const ServeShape& s) {
  const uint64_t rows = static_cast<uint64_t>(s.parallel) * static_cast<uint64_t>(2 + s.lookup);
  return checked_mul(checked_mul(rows, static_cast<uint64_t>(spec.cfg.n_vocab), "slot logits"), 4,
                     "slot logits");
}

// Beside the engine: every slot's KV but the one the engine counts, and the slots' logits.
uint64_t beside_engine(const ModelSpec& spec, const ServeShape& s, const EngineOptions& o) {
  const uint64_t other_kv = checked_mul(slot_kv_bytes(spec, s.ctx, o.kv_type, o.state_checkpoints),
                                        static_cast<uint64_t>(s.parallel - 1), "KV caches");
  return checked_add(other_kv, slot_logits_bytes(spec, s), "server memory");
}

}  // namespace

EngineOptions serve_engine_options(EngineOptions o, const std::string& model_path,
                                   const ServeShape& shape) {
  if (o.memory_budget == 0) return o;
  const auto spec = open_model_spec(model_path);
  // --memory-budget is for MoE models only: the engine says so for the others.
  if (!spec->cfg.is_moe()) return o;
  const uint64_t beside = beside_engine(*spec, shape, o);
  if (beside >= o.memory_budget)
    fail(ErrorKind::Budget,
         "memory budget " + std::to_string(o.memory_budget) +
             " bytes cannot hold the KV caches of " + std::to_string(shape.parallel) + " slots x " +
             std::to_string(shape.ctx) + " rows and their logits (" + std::to_string(beside) +
             " bytes beside one slot's KV) before any weight: lower --parallel or -c");
  o.memory_budget -= beside;
  return o;
}

ServeMemory serve_memory(Engine& engine, const ServeShape& shape, uint64_t budget) {
  const ModelSpec& spec = engine.spec();
  const Footprint& f = engine.footprint();
  const EngineOptions& eo = engine.options();
  ServeMemory m;
  m.engine = f.total;
  m.other_kv = checked_mul(slot_kv_bytes(spec, shape.ctx, eo.kv_type, eo.state_checkpoints),
                           static_cast<uint64_t>(shape.parallel - 1), "KV caches");
  m.slot_logits = slot_logits_bytes(spec, shape);
  // The scheduler's forward pass takes a decode row of every slot at once.
  if (shape.parallel > eo.prefill_batch) {
    FootprintRequest req;
    req.ctx = eo.ctx;
    req.kv_type = eo.kv_type;
    req.expert_slots = eo.expert_slots;
    req.prefill_batch = shape.parallel;
    req.ram_budget = eo.ram_budget;
    req.state_checkpoints = eo.state_checkpoints;
    req.backend = &engine.backend();
    const Footprint wide = compute_footprint(spec, req);
    m.wide_batch = (wide.workspace + wide.backend_scratch) -
                   std::min(wide.workspace + wide.backend_scratch, f.workspace + f.backend_scratch);
  }
  m.total = checked_add(checked_add(m.engine, m.other_kv, "server memory"),
                        checked_add(m.slot_logits, m.wide_batch, "server memory"), "server memory");
  if (budget > 0 && m.total > budget)
    fail(ErrorKind::Budget,
         "memory budget " + std::to_string(budget) + " bytes cannot hold the server: model " +
             std::to_string(m.engine) + " + KV caches of the other " +
             std::to_string(shape.parallel - 1) + " slots " + std::to_string(m.other_kv) +
             " + slot logits " + std::to_string(m.slot_logits) + " + batch of " +
             std::to_string(shape.parallel) + " rows " + std::to_string(m.wide_batch) + " = " +
             std::to_string(m.total) + " bytes: lower --parallel or -c");
  return m;
}

void print_serve_memory(const ServeMemory& m, const ServeShape& shape, std::FILE* out) {
  std::fprintf(out,
               "footprint  server: model %.2f MiB (1 slot's KV) + KV of %d more slots %.2f MiB + "
               "slot logits %.2f MiB + batch of %d rows %.2f MiB = %.2f MiB\n",
               mib(m.engine), shape.parallel - 1, mib(m.other_kv), mib(m.slot_logits),
               shape.parallel, mib(m.wide_batch), mib(m.total));
}

EncoderServeMemory encoder_serve_memory(const Encoder& encoder, int64_t rows, uint64_t budget) {
  EncoderServeMemory m;
  m.weights = encoder.weight_bytes();
  m.pass = encoder.workspace_bytes(rows);
  m.rows = rows;
  m.total = checked_add(m.weights, m.pass, "server memory");
  if (budget > 0 && m.total > budget)
    fail(ErrorKind::Budget, "memory budget " + std::to_string(budget) +
                                " bytes cannot hold the server: encoder weights " +
                                std::to_string(m.weights) + " + a pass of " + std::to_string(rows) +
                                " rows " + std::to_string(m.pass) + " = " +
                                std::to_string(m.total) + " bytes: lower --parallel");
  return m;
}

void print_encoder_serve_memory(const EncoderServeMemory& m, std::FILE* out) {
  std::fprintf(out,
               "footprint  server: encoder weights %.2f MiB + a pass of %lld rows %.2f MiB = "
               "%.2f MiB\n",
               mib(m.weights), static_cast<long long>(m.rows), mib(m.pass), mib(m.total));
}

}  // namespace ts::cli
