#include <sstream>
#include <unordered_map>

#include "ir/ir.h"

namespace qd {

const char *unary_op_name(UnaryOp op) {
  static const char *n[] = {"neg", "not", "bit_not", "cast", "bit_cast", "abs", "sqrt", "sin", "cos", "tan",
                            "exp", "log", "floor", "ceil", "round", "tanh", "asin", "acos", "atan", "trunc",
                            "popcnt", "clz", "ctz"};
  return n[static_cast<int>(op)];
}

const char *binary_op_name(BinaryOp op) {
  static const char *n[] = {"add", "sub", "mul", "div", "floordiv", "mod", "pow", "min", "max", "bit_and", "bit_or",
                            "bit_xor", "shl", "shr", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "rem"};
  return n[static_cast<int>(op)];
}

const char *simt_op_name(SimtOp op) {
  static const char *n[] = {"block.sync", "block.mem_fence", "grid.mem_fence", "block.thread_idx",
                            "block.global_thread_idx", "grid.num_threads", "subgroup.invocation_id", "subgroup.sync",
                            "subgroup.mem_fence", "subgroup.shuffle", "subgroup.shuffle_up",
                            "subgroup.shuffle_down", "subgroup.shuffle_xor", "subgroup.broadcast",
                            "subgroup.broadcast_first", "subgroup.ballot", "subgroup.all", "subgroup.any",
                            "subgroup.elect", "subgroup.reduce", "subgroup.exclusive_scan"};
  return n[static_cast<int>(op)];
}

bool Stmt::is_pure() const {
  switch (kind) {
    case StmtKind::Const: case StmtKind::Arg: case StmtKind::GlobalPtr: case StmtKind::Unary:
    case StmtKind::Binary: case StmtKind::Select: case StmtKind::Fns:
      return true;
    default:
      return false;
  }
}

Stmt *Block::push(std::unique_ptr<Stmt> s) {
  s->parent = this;
  stmts.push_back(std::move(s));
  return stmts.back().get();
}

void for_each_stmt(Block &b, const std::function<void(Stmt &)> &f) {
  for (size_t i = 0; i < b.stmts.size(); i++) {
    Stmt &s = *b.stmts[i];
    f(s);
    if (s.body) for_each_stmt(*s.body, f);
    if (s.else_body) for_each_stmt(*s.else_body, f);
  }
}

void replace_uses(Block &b, Stmt *from, Stmt *to) {
  for_each_stmt(b, [&](Stmt &s) {
    for (auto &o : s.operands)
      if (o == from) o = to;
  });
}

// Appends copies of `src`'s statements (child blocks included) to `dst`, operands renamed by `m`
// (which learns each copy).
void clone_into(const Block &src, Block &dst, CloneMap &m) {
  for (const auto &s : src.stmts) {
    auto c = clone_leaf(*s);
    for (auto &o : c->operands) o = mapped(m, o);
    Stmt *raw = dst.push(std::move(c));
    m[s.get()] = raw;
    for (auto [from, to] : {std::pair{&s->body, &raw->body}, std::pair{&s->else_body, &raw->else_body}}) {
      if (!*from) continue;
      *to = std::make_unique<Block>();
      (*to)->owner = raw;
      clone_into(**from, **to, m);
    }
  }
}

std::unique_ptr<Stmt> clone_leaf(const Stmt &s) {
  auto c = std::make_unique<Stmt>(s.kind, s.dtype);
  c->operands = s.operands;
  c->loc = s.loc;
  c->ival = s.ival;
  c->byte_offset = s.byte_offset;
  c->fval = s.fval;
  c->op = s.op;
  c->cast_from = s.cast_from;
  c->is_volatile = s.is_volatile;
  c->is_atomic = s.is_atomic;
  c->nontemporal = s.nontemporal;
  c->order = s.order;
  c->scope = s.scope;
  c->lowering = s.lowering;
  c->serialize = s.serialize;
  c->independent = s.independent;
  c->vector_width = s.vector_width;
  c->reassoc = s.reassoc;
  c->exact = s.exact;
  c->block_dim = s.block_dim;
  c->label = s.label;
  c->lanes = s.lanes;
  return c;
}

Stmt *mapped(const CloneMap &m, Stmt *s) {
  auto it = m.find(s);
  return it == m.end() ? s : it->second;
}

Stmt *insert_before(Stmt *anchor, std::unique_ptr<Stmt> s) {
  Block *b = anchor->parent;
  for (size_t i = 0; i < b->stmts.size(); i++) {
    if (b->stmts[i].get() == anchor) {
      s->parent = b;
      Stmt *raw = s.get();
      b->stmts.insert(b->stmts.begin() + i, std::move(s));
      return raw;
    }
  }
  return nullptr;
}

const Stmt *first_call(Block &b) {
  const Stmt *call = nullptr;
  for_each_stmt(b, [&](Stmt &s) {
    if (!call && s.kind == StmtKind::Call) call = &s;
  });
  return call;
}

namespace {

class Printer {
 public:
  explicit Printer(const KernelIR &k) : k_(k) {}

  std::string print() {
    os_ << "kernel " << k_.name << "(";
    for (size_t i = 0; i < k_.args.size(); i++) {
      auto &a = k_.args[i];
      os_ << (i ? ", " : "") << a.name << ": "
          << (a.kind == ArgDesc::Scalar ? std::string(dtype_name(a.dtype))
                                        : "ndarray[" + std::string(dtype_name(a.dtype)) + "]");
    }
    os_ << ")\n";
    if (k_.tasks.empty()) {
      block(k_.body, 1);
    } else {
      for (size_t i = 0; i < k_.tasks.size(); i++) {
        auto &t = k_.tasks[i];
        os_ << "  task " << i << (t.parallel ? " (parallel range-for)" : " (serial)")
            << (t.when == Task::When::WithScratch ? " with scratch" : t.when == Task::When::WithoutScratch ? " without scratch" : "")
            << ":\n";
        block(t.prologue, 2);
        if (t.scratch_items) os_ << "    scratch items: " << v(t.scratch_items) << "\n";
        if (!t.pre_loop.stmts.empty()) os_ << "    each thread, before its share of the loop:\n";
        block(t.pre_loop, 3);
        block(t.body, 2);
        if (!t.post_loop.stmts.empty()) os_ << "    each thread, after its share of the loop:\n";
        block(t.post_loop, 3);
      }
    }
    for (const FunctionDesc &f : k_.functions) {
      os_ << "function " << f.name << "(";
      for (size_t i = 0; i < f.params.size(); i++) os_ << (i ? ", " : "") << dtype_name(f.params[i]);
      os_ << ") -> (";
      for (size_t i = 0; i < f.returns.size(); i++) os_ << (i ? ", " : "") << dtype_name(f.returns[i]);
      os_ << "):\n";
      block(f.code->body, 1);
    }
    return os_.str();
  }

 private:
  std::string v(const Stmt *s) {
    auto it = ids_.find(s);
    if (it == ids_.end()) it = ids_.emplace(s, next_++).first;
    return "$" + std::to_string(it->second);
  }

  std::string buffer(int64_t b) {
    auto &d = k_.buffers.at(b);
    switch (d.kind) {
      case BufferKind::Field: return "field " + d.name;
      case BufferKind::Ndarray: return "ndarray " + d.name;
      case BufferKind::Temps: return "temps";
      case BufferKind::Private: return "private copy of " + d.name;
      case BufferKind::Shared: return "shared " + d.name;
      case BufferKind::Scratch: return "scratch " + d.name;
      default: return "result";
    }
  }

  void block(const Block &b, int depth) {
    for (auto &s : b.stmts) stmt(*s, depth);
  }

  void stmt(const Stmt &s, int depth) {
    std::string pad(depth * 2, ' ');
    os_ << pad;
    if (s.dtype != DataType::none && s.kind != StmtKind::Alloca) os_ << v(&s) << " : " << dtype_name(s.dtype) << " = ";
    auto ops = [&](size_t from = 0) {
      std::string r;
      for (size_t i = from; i < s.operands.size(); i++) r += (i > from ? ", " : "") + v(s.operands[i]);
      return r;
    };
    // The order and scope, where they are not the default (Relaxed at Device scope).
    auto order = [&]() -> std::string {
      if (s.order == MemoryOrder::Relaxed && s.scope == MemScope::Device) return "";
      return std::string(" ") + memory_order_name(s.order) + "@" + mem_scope_name(s.scope);
    };
    switch (s.kind) {
      case StmtKind::Const:
        if (is_real(s.dtype)) os_ << "const " << s.fval;
        else os_ << "const " << s.ival;
        break;
      case StmtKind::Arg: os_ << "arg[" << s.ival << "]"; break;
      case StmtKind::GlobalPtr: {
        // A word CAS loop's pointer: the 32-bit word [i] of a narrower-typed buffer (legalize.cpp).
        const BufferDesc &d = k_.buffers.at(s.ival);
        bool word = d.kind != BufferKind::Temps && d.kind != BufferKind::Result && bit_width(s.dtype) != bit_width(d.dtype);
        os_ << "global ptr " << buffer(s.ival) << (word ? " word" : "") << "[" << ops() << "]";
        break;
      }
      case StmtKind::GlobalLoad:
        os_ << (s.is_atomic ? "global load atomic" + order() + " " : s.is_volatile ? "global load volatile " : "global load ")
            << ops();
        break;
      case StmtKind::GlobalStore: os_ << (s.is_atomic ? "global store atomic" + order() + " " : s.nontemporal ? "global store nontemporal " : "global store ") << ops(); break;
      case StmtKind::Fence: os_ << "fence" << order(); break;
      case StmtKind::Alloca: os_ << v(&s) << " = alloca " << dtype_name(s.dtype); break;
      case StmtKind::LocalLoad: os_ << "local load " << ops(); break;
      case StmtKind::LocalStore: os_ << "local store " << ops(); break;
      case StmtKind::Unary: os_ << unary_op_name(static_cast<UnaryOp>(s.op)) << " " << ops(); break;
      case StmtKind::Binary:
        os_ << binary_op_name(static_cast<BinaryOp>(s.op)) << (s.reassoc ? " reassoc " : " ") << ops();
        break;
      case StmtKind::Select: os_ << "select " << ops(); break;
      case StmtKind::Fns: os_ << "fns " << ops(); break;
      case StmtKind::Span:
        if (s.op == static_cast<int>(SpanOp::ExclusiveScan))
          os_ << "span exclusive_scan " << binary_op_name(static_cast<BinaryOp>(s.ival)) << " " << ops();
        else
          os_ << "span compress " << ops();
        break;
      case StmtKind::Atomic:
        os_ << (s.operands[0]->kind == StmtKind::Alloca ? "local atomic " : "global atomic ")
            << atomic_op_info(s.atomic_op()).name << order() << " " << ops();
        break;
      case StmtKind::LoopIndex: os_ << "loop_index " << ops(); break;
      case StmtKind::Break: os_ << "break"; break;
      case StmtKind::Continue: os_ << "continue"; break;
      case StmtKind::Return: os_ << "return " << ops(); break;
      case StmtKind::Param: os_ << "param[" << s.ival << "]"; break;
      case StmtKind::Call: os_ << v(&s) << " = call " << k_.functions.at(s.ival).name << "(" << ops() << ")"; break;
      case StmtKind::CallResult: os_ << "call result[" << s.ival << "] " << ops(); break;
      case StmtKind::Simt:
        os_ << simt_op_name(static_cast<SimtOp>(s.op));
        if (s.op == static_cast<int>(SimtOp::SubgroupReduce) || s.op == static_cast<int>(SimtOp::SubgroupExclusiveScan))
          os_ << " " << binary_op_name(static_cast<BinaryOp>(s.ival));
        if (!s.operands.empty()) os_ << " " << ops();
        break;
      case StmtKind::If:
        os_ << "if " << ops() << ":\n";
        block(*s.body, depth + 1);
        if (s.else_body) {
          os_ << pad << "else:\n";
          block(*s.else_body, depth + 1);
        }
        return;
      case StmtKind::While:
        os_ << "while true:\n";
        block(*s.body, depth + 1);
        return;
      case StmtKind::RangeFor:
        os_ << v(&s) << " = for range(" << ops() << ")" << (s.serialize ? " serial" : "")
            << (s.independent ? " independent" : "");
        if (s.block_dim) os_ << " block_dim=" << s.block_dim;
        if (s.vector_width) os_ << " vector_width=" << s.vector_width;
        if (s.first_index) os_ << " grid-stride from " << v(s.first_index) << " next " << v(s.next_index);
        if (s.label) os_ << " (" << s.label << ")";
        os_ << ":\n";
        block(*s.body, depth + 1);
        return;
    }
    os_ << "\n";
  }

  const KernelIR &k_;
  std::ostringstream os_;
  std::unordered_map<const Stmt *, int> ids_;
  int next_ = 0;
};

}  // namespace

std::string print_ir(const KernelIR &k) { return Printer(k).print(); }

}  // namespace qd
