// JSON schemas (structured outputs): what compiles and what is refused by name; SchemaPrefix
// accepts an instance byte by byte and refuses each kind of violation at its first byte; random
// walks through the recognizer (random accepted bytes, then a greedy completion from every prefix
// on the way) always end in text that parses and that an independent validator of the same
// keywords (fuzz/json_schema_harness.h, on parsed values) accepts; the mask over the bundled
// vocabulary equals the recognizer token by token; generation on the bundled model gives valid
// instances.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../../fuzz/json_schema_harness.h"
#include "constrain/json_constraint.h"
#include "constrain/json_schema.h"
#include "constrain/schema_prefix.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "text/constraint_vocabulary.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

using nlohmann::json;

bool valid(const json& v, const json& s, const json& root) {
  return fuzz::schema_valid(v, s, root);
}

// ---- Schemas ----

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "height": {"type": "number"},
    "email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "role": {"enum": ["admin", "user", "guest"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 3},
    "active": {"type": "boolean"},
    "address": {"$ref": "#/$defs/Address"}
  },
  "required": ["name", "age", "role", "tags"],
  "additionalProperties": false,
  "$defs": {
    "Address": {
      "type": "object",
      "properties": {"city": {"type": "string"}, "zip": {"type": ["integer", "null"]}},
      "required": ["city"]
    }
  }
})");

// A recursive tree, numbers as choices, a free-form map of integers and an untyped value.
const json kTree = json::parse(R"({
  "type": "object",
  "properties": {
    "root": {"$ref": "#/$defs/Node"},
    "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
    "level": {"enum": [1, 12, 2.5, -3, true, null, "x", [1, 2], {"a": [true]}]},
    "extra": {}
  },
  "required": ["root", "level"],
  "$defs": {
    "Node": {
      "type": "object",
      "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2}
      },
      "required": ["value"],
      "additionalProperties": false
    }
  }
})");

std::shared_ptr<const JsonSchema> compiled(const json& s) {
  return std::make_shared<const JsonSchema>(JsonSchema::compile(s));
}

size_t accepted(const JsonSchema& schema, const std::string& text) {
  SchemaPrefix p(&schema);
  for (size_t i = 0; i < text.size(); ++i)
    if (!p.feed(static_cast<uint8_t>(text[i]))) return i;
  return text.size();
}

bool complete(const JsonSchema& schema, const std::string& text) {
  SchemaPrefix p(&schema);
  return p.feed_all(text) && p.complete();
}

TEST(JsonSchema, CompilesTheImplementedKeywords) {
  EXPECT_NO_THROW(JsonSchema::compile(kPerson));
  EXPECT_NO_THROW(JsonSchema::compile(kTree));
  // Pydantic's shapes: allOf around a $ref, nullable, annotations.
  EXPECT_NO_THROW(JsonSchema::compile(json::parse(R"({"title": "M", "type": "object",
    "properties": {"d": {"allOf": [{"$ref": "#/$defs/D"}], "description": "x", "default": 1},
                   "n": {"type": "string", "nullable": true, "format": "date-time"}},
    "$defs": {"D": {"type": "integer", "title": "D"}}})")));
}

TEST(JsonSchema, RefusesWhatIsNotImplementedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}})",
       "at #/properties/a: the keyword pattern is not supported"},
      {R"({"type": "object", "properties": {"a": {"type": "number", "minimum": 0}}})",
       "minimum / maximum are supported on integers only"},
      {R"({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}})",
       "the keyword multipleOf is not supported"},
      {R"({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer",
          "exclusiveMinimum": 3, "maximum": 3.5}}})",
       "no JSON value satisfies it"},
      {R"({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer",
          "maximum": -1e19}}})",
       "no JSON value satisfies it"},  // below every int64
      {R"({"type": "array"})", "the root must be an object"},
      {R"({"type": "object", "properties": {"a": {"anyOf": [{"type": "object"},
          {"type": "object", "required": ["x"]}]}}})",
       "branches that start alike"},
      {R"({"type": "object", "properties": {"a": {"oneOf": [{"type": "integer"},
          {"type": "number"}]}}})",
       "branches that start alike"},  // 1 matches both: oneOf would refuse it
      {R"({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {}]}}})",
       "a oneOf branch that allows any value"},
      {R"({"type": "object", "properties": {"a": {"enum": ["a", "abc"], "minLength": 2}}})",
       "keywords beside enum"},
      {R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}})",
       "$ref \"#/$defs/Missing\" does not resolve"},
      {R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
          "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}})",
       "a cycle of $refs"},
      {R"({"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#"}}})",
       "no JSON value satisfies it"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "minLength": 3,
          "maxLength": 2}}, "required": ["a"]})",
       "no JSON value satisfies it"},
      {R"({"type": "object", "required": ["b"], "additionalProperties": false})",
       "required \"b\" is not allowed by additionalProperties"},
      {R"({"type": "object", "properties": {"a": {"type": "strin"}}})", "unknown type \"strin\""},
      {R"({"type": "object", "properties": {"a": {"enum": [1e300]}}})", "cannot be written"},
      {R"({"type": "object", "properties": {"a": {"items": [{"type": "string"}]}}})", "tuples"},
  };
  for (const auto& [schema, want] : cases) {
    try {
      JsonSchema::compile(json::parse(schema));
      ADD_FAILURE() << "compiled: " << schema;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos)
          << e.what() << "\nwanted: " << want;
    }
  }
  // 17 levels of required objects: the shortest instance is deeper than kMaxDepth.
  json deep = {{"type", "object"}};
  for (int i = 0; i < 16; ++i)
    deep = {{"type", "object"}, {"properties", {{"x", deep}}}, {"required", {"x"}}};
  EXPECT_THROW(JsonSchema::compile(deep), Error);
}

TEST(SchemaPrefix, AcceptsInstancesAndRefusesEachViolationAtItsByte) {
  const JsonSchema person = JsonSchema::compile(kPerson);
  const std::string good =
      R"({"name": "Ada", "age": 36, "role": "admin", "tags": ["x", "yz"], "email": null,)"
      R"( "address": {"city": "London", "zip": null}, "height": 1.65e0, "active": true})";
  EXPECT_TRUE(complete(person, good)) << accepted(person, good);
  EXPECT_TRUE(valid(json::parse(good), kPerson, kPerson));
  // Each text is refused at the byte after the given prefix.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({"nam)", "x"},                                   // not a declared key
      {R"({"name": "A", ")", "n"},                         // a key written twice
      {R"({"name": "A", "age": 1, "role": "user")", "}"},  // tags is required
      {R"({"age": 1)", "."},                               // integer
      {R"({"age": -)", "1"},                               // minimum 0 (-0 is 0)
      {R"({"age": 15)", "1"},                              // maximum 150
      {R"({"age": 0)", "0"},                               // a leading zero
      {R"({"name": )", "1"},                               // wrong type
      {R"({"name": ")", "\""},                             // minLength 1
      {R"({"name": "abcdefghijkl)", "m"},                  // maxLength 12
      {R"({"role": "ad)", "x"},                            // not an enum value
      {R"({"tags": [)", "]"},                              // minItems 1
      {R"({"tags": ["a", "b", "c")", ","},                 // maxItems 3
      {R"({"email": )", "1"},                              // string or null
      {R"({"address": {)", "}"},                           // city is required
      {R"({"name": "a", "age": 1, "role": "user", "tags": ["a"], "email": null, "height": 1,)"
       R"( "active": true, "address": {"city": "c"})",
       ","},  // every key written
  };
  for (const auto& [prefix, byte] : refused) {
    ASSERT_EQ(accepted(person, prefix), prefix.size()) << prefix;
    EXPECT_EQ(accepted(person, prefix + byte), prefix.size()) << prefix << byte;
  }
  const JsonSchema tree = JsonSchema::compile(kTree);
  for (const std::string& t :
       {std::string(
            R"({"root": {"value": 1, "children": [{"value": 2}, {"value": 3, "children": []}]},)"
            R"( "level": 12, "scores": {"a": 1, "b": -2}, "extra": [1, {"x": "y"}]})"),
        std::string(R"({"level": 2.5, "root": {"value": 0}})"),
        std::string(R"({"level": {"a":[true]}, "root": {"value": 0}})"),
        std::string(R"({"level": -3, "root": {"value": 0}})")}) {
    EXPECT_TRUE(complete(tree, t)) << t << " (accepted " << accepted(tree, t) << ")";
    EXPECT_TRUE(valid(json::parse(t), kTree, kTree)) << t;
  }
  // exclusiveMinimum 9.5, exclusiveMaximum 21: 10 to 20. "2" can still become 20; "3" cannot.
  const JsonSchema range = JsonSchema::compile(json::parse(R"({"type": "object", "properties":
      {"n": {"type": "integer", "exclusiveMinimum": 9.5, "exclusiveMaximum": 21},
       "m": {"type": ["integer", "null"], "minimum": -5, "maximum": -3}}})"));
  EXPECT_TRUE(complete(range, R"({"n": 20, "m": -3})"));
  const JsonSchema wide = JsonSchema::compile(json::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": -1e30}}})"));
  EXPECT_TRUE(complete(wide, R"({"a": -9223372036854775808})"));  // a bound past int64: none
  // Integer bounds are exact past 2^53, where a double would round 2^53 + 1 to 2^53.
  const JsonSchema exact = JsonSchema::compile(json::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer",
          "exclusiveMaximum": 9007199254740993}}})"));
  EXPECT_TRUE(complete(exact, R"({"a": 9007199254740992})"));
  EXPECT_EQ(accepted(exact, R"({"a": 9007199254740993})"), 21u);  // at its last digit
  EXPECT_TRUE(complete(range, R"({"n": 10, "m": null})"));
  EXPECT_EQ(accepted(range, R"({"n": 3)"), 6u);
  EXPECT_EQ(accepted(range, R"({"n": 21)"), 7u);
  EXPECT_EQ(accepted(range, R"({"n": 2})"), 7u);  // 2 itself is out: the number cannot end
  EXPECT_EQ(accepted(range, R"({"m": -2)"), 7u);
  EXPECT_EQ(accepted(range, R"({"m": -0)"), 7u);
  EXPECT_EQ(accepted(range, R"({"m": 4)"), 6u);
  // Integers are held to int64 whatever the schema says.
  EXPECT_TRUE(complete(tree, R"({"level": 1, "root": {"value": -9223372036854775808}})"));
  EXPECT_EQ(accepted(tree, R"({"level": 1, "root": {"value": 9223372036854775808)"), 49u);
  EXPECT_EQ(accepted(tree, R"({"level": 13)"), 11u);  // 1 and 12 are choices, 13 is not
  EXPECT_EQ(accepted(tree, R"({"level": 1.)"), 11u);
  EXPECT_EQ(accepted(tree, R"({"level": 2,)"), 11u);      // 2 alone is not a choice
  EXPECT_EQ(accepted(tree, R"({"level": {"a": )"), 15u);  // choices are written compactly
  EXPECT_EQ(accepted(tree, R"({"root": {"value": 1, "children": [{"value": 1}, {"value": 2}, )"),
            61u);  // maxItems 2: the second ','
}

// Completes `p` greedily (fuzz/json_schema_harness.h); fails the test when it cannot.
std::string complete_greedily(SchemaPrefix p) {
  std::string out;
  EXPECT_TRUE(fuzz::complete_schema_greedily(p, out, 5000)) << "no completion after " << out;
  return out;
}

// Random accepted bytes from a small alphabet of JSON's bytes, then a greedy completion; from
// every prefix on the way a greedy completion must exist and give a valid instance.
TEST(SchemaPrefix, RandomWalksEndInValidInstances) {
  const std::string alphabet = " \n{}[],:\"\\-.0123456789eEtrufalsn abcdxyzAC\xC3\xA9";
  for (const json& schema_json : {kPerson, kTree}) {
    const JsonSchema schema = JsonSchema::compile(schema_json);
    for (uint32_t seed = 0; seed < 60; ++seed) {
      std::mt19937 rng(seed);
      SchemaPrefix p(&schema);
      std::string text;
      for (int step = 0; step < 160 && !p.complete(); ++step) {
        const std::string options = fuzz::next_bytes(p, alphabet);
        ASSERT_FALSE(options.empty()) << "dead end after " << text;
        const char c = options[rng() % options.size()];
        ASSERT_TRUE(p.feed(static_cast<uint8_t>(c)));
        text += c;
        if (step % 8 == 0) {
          const std::string whole = text + complete_greedily(p);
          const json parsed = json::parse(whole, nullptr, false);
          ASSERT_FALSE(parsed.is_discarded()) << whole;
          ASSERT_TRUE(valid(parsed, schema_json, schema_json)) << whole;
        }
      }
      const std::string whole = text + complete_greedily(p);
      const json parsed = json::parse(whole, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << whole;
      EXPECT_TRUE(valid(parsed, schema_json, schema_json)) << whole;
    }
  }
}

// The mask allows exactly the tokens whose bytes the recognizer accepts.
TEST(SchemaConstraint, MaskAllowsExactlyTheTokensThatContinue) {
  auto engine = Engine::open(test::repo_dir() + "/models/tiny-moe-q8_0.gguf", {});
  const Tokenizer tok = load_tokenizer(engine->spec());
  const auto vocab = json_vocabulary(tok);
  const auto schema = compiled(kPerson);
  for (const std::string& prefix :
       {std::string(""), std::string("{"), std::string(R"({"na)"), std::string(R"({"name": "Ad)"),
        std::string(R"({"role": )"), std::string(R"({"tags": ["a", )"),
        std::string(R"({"age": 3)")}) {
    JsonConstraint c(vocab, schema);
    SchemaPrefix p(schema.get());
    for (int32_t id : tok.encode(prefix, false, false)) {
      ASSERT_TRUE(p.feed_all(vocab->pieces[static_cast<size_t>(id)])) << prefix;
      c.advance(id);
    }
    std::vector<float> logits(static_cast<size_t>(tok.vocab_size()), 0.0f);
    c.mask(logits);
    for (size_t id = 0; id < logits.size(); ++id) {
      const bool want = !vocab->pieces[id].empty() && p.accepts(vocab->pieces[id]);
      ASSERT_EQ(!std::isinf(logits[id]), want) << "prefix '" << prefix << "' token " << id;
    }
  }
}

// The bundled base model, steered: every answer is a valid instance (or, cut by max_tokens, a
// prefix the recognizer accepts).
TEST(SchemaConstraint, GenerationGivesValidInstances) {
  auto engine = Engine::open(test::repo_dir() + "/models/tiny-moe-q8_0.gguf", {});
  const Tokenizer tok = load_tokenizer(engine->spec());
  const std::vector<int32_t> prompt = tok.encode("The children walked to", tok.add_bos(), false);
  for (const json& schema_json : {kPerson, kTree}) {
    const auto schema = compiled(schema_json);
    for (const float temperature : {0.0f, 1.0f})
      for (const uint64_t seed : {1u, 2u}) {
        Session session(*engine);
        GenerateOptions o;
        o.max_tokens = 400;
        o.json = schema;
        o.sampling.temperature = temperature;
        o.sampling.seed = seed;
        const GenerateResult r = generate(session, tok, prompt, o, [](const std::string&) {});
        if (r.finish == FinishReason::Length) {
          EXPECT_EQ(accepted(*schema, r.text), r.text.size()) << r.text;
          continue;
        }
        const json parsed = json::parse(r.text, nullptr, false);
        ASSERT_FALSE(parsed.is_discarded()) << r.text;
        EXPECT_TRUE(valid(parsed, schema_json, schema_json)) << r.text;
        if (temperature == 0.0f) break;
      }
  }
}

}  // namespace
}  // namespace ts
