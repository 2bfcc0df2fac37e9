#pragma once
// The syntax tree of a parsed template: expressions and statements, each
// with the source line it came from (for error messages).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tern/jinja/value.h"

namespace tern::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Arguments of a call, filter or test: positional, then name=value.
struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
  enum class Kind {
    Literal,  // literal
    Name,     // name
    List,     // kids
    Tuple,    // kids
    Dict,     // kids: key, value, key, value...
    Attr,     // kids[0].name
    Item,     // kids[0][kids[1]]
    Slice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids: omitted)
    Call,     // kids[0](args)
    Filter,   // kids[0] | name(args)  (kids[0] null in a filter block)
    Test,     // kids[0] is [not] name(args)
    Unary,    // op kids[0]: "-", "+", "not"
    Binary,   // kids[0] op kids[1]: arithmetic, "~", "and", "or"
    Compare,  // kids[0] ops[0] kids[1] ops[1] kids[2] ... (chained)
    Cond,     // kids[1] if kids[0] else kids[2] (kids[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;  // Name, Attr, Filter, Test; the operator of Unary and Binary
  std::vector<ExprPtr> kids;
  std::vector<std::string> ops;  // Compare
  Args args;                     // Call, Filter, Test
  bool negated = false;          // Test: "is not"
  int height = 1;                // 1 + the tallest kid (bounded by the parser)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A macro parameter: name and default value (null: required).
struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // conds[i] -> bodies[i]; bodies.size() == conds.size() + 1 with an else
    For,          // for targets in expr [if cond] -> bodies[0], else bodies[1]
    Set,          // set targets (or target: ns.attr) = expr
    SetBlock,     // set targets[0] [| filter] -> bodies[0]
    Macro,        // macro name(params) -> bodies[0]
    CallBlock,    // call(params) expr -> bodies[0] as caller()
    FilterBlock,  // filter expr -> bodies[0]
    Break,
    Continue,
    Scope,  // generation block -> bodies[0]
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;  // Output, For iterable, Set value, CallBlock call, filter (SetBlock, FilterBlock)
  ExprPtr cond;  // For's filter
  ExprPtr target;  // Set: an Attr target (ns.x)
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // For / Set names; Macro name in name_
  std::string name;                  // Macro
  std::vector<Param> params;         // Macro, CallBlock
};

struct Program {
  Body body;
};

}  // namespace tern::jinja
