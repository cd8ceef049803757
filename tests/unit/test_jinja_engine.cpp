// The Jinja engine's semantics one feature at a time (expected texts are what Python's jinja2
// renders, with transformers' settings), and its refusals: syntax errors, errors raised while
// rendering, and the limits that stop a hostile template.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "text/jinja/json_value.h"
#include "text/jinja/template.h"

namespace ts::jinja {
namespace {

std::string render(const std::string& source, const std::string& context_json = "{}",
                   const RenderOptions& options = {}) {
  const Value context = from_json(nlohmann::ordered_json::parse(context_json));
  return Template(source).render(context.as_dict(), options);
}

// The kind and message of the error rendering `source` raises ("" when it renders).
std::pair<ErrorKind, std::string> failure(const std::string& source,
                                          const RenderOptions& options = {}) {
  try {
    render(source, "{}", options);
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {ErrorKind::Runtime, ""};
}

struct Case {
  const char* source;
  const char* context;
  const char* expected;
};

// Generated from Python's jinja2 3.1 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks).
const Case kCases[] = {
    {R"j({{ {'k': 'é😀"', 'n': [1, 2]} | tojson(ensure_ascii=True) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=(',', ':')) }}|{{ 'x' | tojson(indent=1) }})j",
     "{}", R"j({"k": "\u00e9\ud83d\ude00\"", "n": [1, 2]}|{"a":2,"b":1}|"x")j"},
    {R"j({% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %})j",
     R"j({"xs": ["a", "b", "c"]})j", R"j(1a,2b,3c)j"},
    {R"j({%- for x in xs if x > 1 -%}
  {{ loop.index0 }}/{{ loop.length }}:{{ x }}
{%- else %}none{% endfor %})j",
     R"j({"xs": [1, 2, 3]})j", R"j(0/2:21/2:3)j"},
    {R"j({% for x in [] %}x{% else %}empty{% endfor %})j", R"j({})j", R"j(empty)j"},
    {R"j({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %})j",
     R"j({"d": {"b": 1, "a": [1, "x", null, true, 1.5]}})j",
     R"j(b=1;a=[1, 'x', None, True, 1.5];)j"},
    {R"j({% set ns = namespace(n=0) %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }})j",
     R"j({})j", R"j(3)j"},
    {R"j({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', punct='?') }})j",
     R"j({})j", R"j(Hi Ann! Hi Bo?)j"},
    {R"j({{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-1] }}|{{ [1,2,3,4][-2:] }}|{{ 'héllo'[1] }})j",
     R"j({})j", R"j(bcd|fedcba|[3, 4]|é)j"},
    {R"j({{ '  x  ' | trim }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'Hello'.upper() }}|{{ 'x' ~ 1 ~ none }})j",
     R"j({})j", R"j(x|['a', 'b', '', 'c']|['a', 'b']|HELLO|x1None)j"},
    {R"j({{ {'b': 1, 'a': 'é"'} | tojson }}|{{ [1, 2.0, none, true] | tojson(indent=2) }})j",
     R"j({})j", R"j({"b": 1, "a": "é\""}|[
  1,
  2.0,
  null,
  true
])j"},
    {R"j({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 10 / 5 }})j",
     R"j({})j", R"j(3 -4 1 2 3.5 1024 1e+20 0.30000000000000004 2.0)j"},
    {R"j({{ x is defined }} {{ y is not defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ 3 is odd }} {{ 1 is integer }} {{ true is integer }})j",
     R"j({"x": 1})j", R"j(True True True True True True True False)j"},
    {R"j({{ xs | map(attribute='n') | join(',') }}|{{ xs | selectattr('n', 'equalto', 2) | list | length }}|{{ xs | rejectattr('n') | list }})j",
     R"j({"xs": [{"n": 1}, {"n": 2}, {"n": 0}]})j", R"j(1,2,0|1|[{'n': 0}])j"},
    {R"j({{ ['b', 'A', 'c'] | sort }}|{{ ['b','A','a'] | unique | list }}|{{ {'b': 2, 'A': 1} | dictsort }}|{{ [3,1,2] | max }})j",
     R"j({})j", R"j(['A', 'b', 'c']|['b', 'A']|[('A', 1), ('b', 2)]|3)j"},
    {R"j({{ 'x' if false }}|{{ 'y' if true else 'z' }}|{{ missing | default('d') }}|{{ '' | default('e', true) }})j",
     R"j({})j", R"j(|y|d|e)j"},
    {R"j(a
  {% if true %}
    b
  {% endif %}
c
)j",
     R"j({})j", R"j(a
    b
c)j"},
    {R"j(a  {%- if true -%}  b  {%- endif -%}  c {# note #}
 d {{- ' e ' -}} f)j",
     R"j({})j", R"j(abc  d e f)j"},
    {R"j({{ 'a\tb\n' }}|{{ "it's" }}|{{ ['it\'s', "q\""] }})j", R"j({})j", R"j(a	b
|it's|["it's", 'q"'])j"},
    {R"j({{ 'Hello {}, {name}!'.format('you', name='me') }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'a-b-c'.rsplit('-', 1) }})j",
     R"j({})j", R"j(Hello you, me!|True|['a-b', 'c'])j"},
    {R"j({% set x %}  inner {{ 1 }} {% endset %}[{{ x }}]{% filter upper %}up{% endfilter %})j",
     R"j({})j", R"j([  inner 1 ]UP)j"},
    {R"j({{ 'line1\nline2' | indent(2) }}|{{ 'line1\nline2' | indent(2, true) }})j", R"j({})j",
     R"j(line1
  line2|  line1
  line2)j"},
    {R"j({% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{{ loop.previtem }}{% endfor %})j",
     R"j({})j", R"j(021)j"},
    {R"j({{ messages[0].content }}{{ messages[0]['role'] }}{{ messages[1] is defined }}{{ messages | length }})j",
     R"j({"messages": [{"role": "user", "content": "hi"}]})j", R"j(hiuserFalse1)j"},
    {R"j({{ (1, 2) }}{{ [1, [2, {'a': none}]] }}{{ 3 in [1, 3] }}{{ 'b' in 'abc' }}{{ 'k' in {'k': 1} }}{{ 1 not in [1] }})j",
     R"j({})j", R"j((1, 2)[1, [2, {'a': None}]]TrueTrueTrueFalse)j"},
    {R"j({{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}{{ not 0 }}{{ none or 'x' }}{{ 0 and 1 }})j",
     R"j({})j", R"j(TrueFalseTrueTrueTruex0)j"},
    {R"j({{ '%s' | format('x') if false else 'ok' }}{{ 'a b c' | wordcount }}{{ 'hello world' | title }}{{ 'ABC' | lower | capitalize }})j",
     R"j({})j", R"j(ok3Hello WorldAbc)j"},
    {R"j({{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ 2.567 | round(2) }} {{ -3 | abs }} {{ [1,2,3] | sum }} {{ [1,2] | first }}{{ [1,2] | last }})j",
     R"j({})j", R"j(3 42 0 2.5 2.57 3 6 12)j"},

};

TEST(JinjaEngine, RendersLikeJinja2) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.source);
    EXPECT_EQ(render(c.source, c.context), c.expected);
  }
}

TEST(JinjaEngine, RaiseExceptionAndUndefinedAreInputErrors) {
  auto [kind, message] = failure("{{ raise_exception('Roles must alternate') }}");
  EXPECT_EQ(kind, ErrorKind::Input);
  EXPECT_NE(message.find("Roles must alternate"), std::string::npos) << message;
  std::tie(kind, message) = failure("\n\n{{ missing.attr }}");
  EXPECT_EQ(kind, ErrorKind::Input);
  EXPECT_EQ(message, "chat template line 3: 'missing' is undefined");
  // jinja2's immutable sandbox: a template cannot change a list.
  std::tie(kind, message) = failure("{% set xs = [] %}{{ xs.append(1) }}");
  EXPECT_NE(message.find("unsafe"), std::string::npos) << message;
}

TEST(JinjaEngine, SyntaxErrorsNameTheLine) {
  const char* bad[] = {"{% if x %}never closed", "{{ 1 + }}", "x\n{% endfor %}",
                       "{% include 'f' %}",      "{{ 'open",  "{% for x in y %}{% endif %}",
                       "{# open comment"};
  for (const char* source : bad) {
    SCOPED_TRACE(source);
    try {
      Template t(source);
      ADD_FAILURE() << "parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
      EXPECT_EQ(std::string(e.what()).rfind("chat template line ", 0), 0u) << e.what();
    }
  }
}

TEST(JinjaEngine, LimitsStopHostileTemplates) {
  RenderOptions small;
  small.limits.max_output = 1 << 20;
  small.limits.max_steps = 100000;
  // Unbounded recursion, a huge loop, an output bomb, a string doubling in a loop.
  const char* hostile[] = {
      "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      "{{ 'x' * 100000000 }}",
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
      "{% endfor %}",
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}"
      "{% endfor %}",
  };
  for (const char* source : hostile) {
    SCOPED_TRACE(source);
    const auto [kind, message] = failure(source, small);
    EXPECT_EQ(kind, ErrorKind::Input) << message;
    EXPECT_FALSE(message.empty());
  }
  // Nesting deeper than the parser takes is refused before rendering.
  std::string deep_list = "{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}";
  std::string deep_not = "{{ ";
  for (int i = 0; i < 5000; ++i) deep_not += "not ";
  deep_not += "x }}";
  std::string deep_if;
  for (int i = 0; i < 5000; ++i) deep_if += "{% if x %}";
  std::string long_chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) long_chain += " + 1";
  long_chain += " }}";
  for (const std::string& source : {deep_list, deep_not, deep_if, long_chain}) {
    try {
      Template t(source);
      ADD_FAILURE() << "parsed " << source.substr(0, 20);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nesting deeper than"), std::string::npos) << e.what();
    }
  }
  // A namespace holding itself renders (and is freed: the ASan build checks).
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"),
            "True");
}

TEST(JinjaEngine, StrftimeNowFormatsTheGivenInstant) {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  RenderOptions options;
  options.now = std::mktime(&tm);
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}", "{}", options), "26 Jul 2024");
}

}  // namespace
}  // namespace ts::jinja
