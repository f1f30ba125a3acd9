// The pybind11 bindings, and nothing else: the Python front end drives the IR builder, the
// runtime and the artefact compiler through these.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "atomics/support_table.h"
#include "ir/builder.h"
#include "runtime/runtime.h"
#include "runtime/vulkan/vulkan_runtime.h"

namespace py = pybind11;
using namespace qd;

namespace {

Backend backend_from_name(const std::string &name) {
  for (Backend b : {Backend::Cpu, Backend::Cuda, Backend::Amdgpu, Backend::Vulkan, Backend::Metal})
    if (name == backend_name(b)) return b;
  throw std::invalid_argument("unknown arch '" + name + "'");
}

void translate_compile_error(const CompileError &e) {
  auto mod = py::module_::import("quadrants.types.exceptions");
  const char *cls = e.kind == ErrorKind::Type     ? "QuadrantsTypeError"
                    : e.kind == ErrorKind::Codegen ? "QuadrantsCompilationError"
                                                   : "QuadrantsSyntaxError";
  PyErr_SetString(mod.attr(cls).ptr(), e.what());
}

void bind_ir(py::module_ &m) {
  py::enum_<DataType>(m, "DataType")
      .value("i8", DataType::i8).value("i16", DataType::i16).value("i32", DataType::i32).value("i64", DataType::i64)
      .value("u8", DataType::u8).value("u16", DataType::u16).value("u32", DataType::u32).value("u64", DataType::u64)
      .value("f16", DataType::f16).value("f32", DataType::f32).value("f64", DataType::f64).value("u1", DataType::u1)
      .value("none", DataType::none);
  m.def("promoted_type", &promoted_type);

  py::enum_<UnaryOp> u(m, "UnaryOp");
  for (int i = 0; i <= static_cast<int>(UnaryOp::Atan); i++) u.value(unary_op_name(UnaryOp(i)), UnaryOp(i));
  for (UnaryOp op : {UnaryOp::PopCount, UnaryOp::Clz, UnaryOp::Ctz}) u.value(unary_op_name(op), op);
  py::enum_<BinaryOp> bo(m, "BinaryOp");
  for (int i = 0; i <= static_cast<int>(BinaryOp::LogicalOr); i++) bo.value(binary_op_name(BinaryOp(i)), BinaryOp(i));

  py::class_<Stmt>(m, "Stmt").def_property_readonly("dtype", [](const Stmt &s) { return s.dtype; });

  auto ref = py::return_value_policy::reference;
  py::class_<Builder>(m, "Builder")
      .def(py::init([](const std::string &name, DataType ip, DataType fp) {
        return std::make_unique<Builder>(name, TypeConfig{ip, fp});
      }))
      .def("set_loc", &Builder::set_loc)
      .def("add_scalar_arg", &Builder::add_scalar_arg)
      .def("add_ndarray_arg", &Builder::add_ndarray_arg)
      .def("add_field", &Builder::add_field)
      .def("add_shared", &Builder::add_shared)
      .def("simt", [](Builder &b, const std::string &name, const std::vector<Stmt *> &operands) {
        for (int i = 0; i < kNumSimtOps; i++)
          if (name == simt_op_name(SimtOp(i))) return b.simt(SimtOp(i), operands);
        throw std::invalid_argument("unknown simt op '" + name + "'");
      }, ref, py::arg("name"), py::arg("operands") = std::vector<Stmt *>{})
      .def("fns", &Builder::fns, ref)
      .def("span_exclusive_scan", &Builder::span_exclusive_scan, ref)
      .def("span_compress", &Builder::span_compress, ref)
      .def("set_returns", &Builder::set_returns)
      .def("set_debug", &Builder::set_debug)
      .def("set_autodiff", &Builder::set_autodiff)
      .def("set_companion", &Builder::set_companion)
      .def("set_ad_stack_size", &Builder::set_ad_stack_size)
      .def("set_access_check", &Builder::set_access_check)
      .def("set_deterministic", &Builder::set_deterministic)
      .def("const_int", &Builder::const_int, ref)
      .def("const_float", &Builder::const_float, ref)
      .def("arg", &Builder::arg, ref)
      .def("ndarray_shape", &Builder::ndarray_shape, ref)
      .def("global_ptr", &Builder::global_ptr, ref)
      .def("global_load", &Builder::global_load, ref)
      .def("global_store", &Builder::global_store, py::arg("ptr"), py::arg("value"), py::arg("nontemporal") = false)
      .def("alloca", &Builder::alloca_, ref)
      .def("alloca_before", &Builder::alloca_before, ref)
      .def("local_load", &Builder::local_load, ref)
      .def("local_store", &Builder::local_store)
      .def("unary", &Builder::unary, ref)
      .def("cast", &Builder::cast, ref)
      .def("bitcast", &Builder::bitcast, ref)
      .def("binary", &Builder::binary, ref)
      .def("select", &Builder::select, ref)
      // A float add that may be reassociated (Stmt::reassoc): the cpu's block reductions, whose
      // order the spec leaves open, vectorize with several accumulators.
      .def("mark_reassoc", [](Builder &, Stmt *s) { s->reassoc = true; })
      .def("atomic", [](Builder &b, const std::string &op, Stmt *target, Stmt *value, Stmt *desired,
                        MemoryOrder order, MemScope scope) {
        auto a = atomic_op_from_name(op);
        if (!a) throw std::invalid_argument("unknown atomic op '" + op + "'");
        return b.atomic(*a, target, value, desired, order, scope);
      }, ref, py::arg("op"), py::arg("target"), py::arg("value"), py::arg("desired") = nullptr,
         py::arg("order") = MemoryOrder::Relaxed, py::arg("scope") = MemScope::Device)
      .def("atomic_load", &Builder::atomic_load, ref)
      .def("atomic_store", &Builder::atomic_store)
      .def("fence", &Builder::fence)
      .def("begin_if", &Builder::begin_if, ref)
      .def("begin_else", &Builder::begin_else)
      .def("end_if", &Builder::end_if)
      .def("begin_while", &Builder::begin_while, ref)
      .def("end_while", &Builder::end_while)
      .def("begin_range_for", &Builder::begin_range_for, ref)
      .def("loop_index", &Builder::loop_index, ref)
      .def("end_range_for", &Builder::end_range_for)
      .def("break_", &Builder::break_)
      .def("continue_", &Builder::continue_)
      .def("return_", &Builder::return_)
      .def("begin_function", &Builder::begin_function)
      .def("end_function", &Builder::end_function)
      .def("param", &Builder::param, ref)
      .def("call", &Builder::call, ref)
      .def("loop_depth", &Builder::loop_depth)
      .def("num_arg_slots", &Builder::num_arg_slots)
      .def("print_ir", [](Builder &b) { return print_ir(b.kernel()); });
}

void bind_atomics(py::module_ &m) {
  py::enum_<MemoryOrder> mo(m, "MemoryOrder", "The memory order of an atomic (docs/atomics.md, Memory order and scope).");
  for (auto o : {MemoryOrder::Relaxed, MemoryOrder::Acquire, MemoryOrder::Release, MemoryOrder::AcqRel})
    mo.value(memory_order_name(o), o);
  py::enum_<MemScope> ms(m, "MemScope", "Which threads an atomic's ordering reaches (docs/atomics.md).");
  for (auto s : {MemScope::Block, MemScope::Device, MemScope::System}) ms.value(mem_scope_name(s), s);
  m.def("memory_model_markdown", &memory_model_markdown);
  m.def("atomic_ops", [] {
    py::list rows;
    for (auto &r : atomic_ops())
      rows.append(py::dict(py::arg("name") = r.name, py::arg("num_operands") = r.num_operands,
                           py::arg("int_only") = r.dtypes != DtypeClass::IntOrFloat,
                           py::arg("unsigned_only") = r.dtypes == DtypeClass::UnsignedOnly,
                           py::arg("params") = r.params, py::arg("effect") = r.effect));
    return rows;
  });
  m.def("atomic_support_markdown", &atomic_support_markdown);
  m.def("atomic_lowering", [](const std::string &backend, const std::string &op, DataType t, bool shared,
                              const std::vector<std::string> &features) {
    auto a = atomic_op_from_name(op);
    if (!a) throw std::invalid_argument("unknown atomic op '" + op + "'");
    auto l = atomic_lowering(backend_from_name(backend), *a, t, shared ? MemorySpace::Shared : MemorySpace::Global,
                             features_from_names(features));
    const char *kinds[] = {"native", "cas", "word_cas", "rejected"};
    return py::make_tuple(kinds[static_cast<int>(l.kind)], l.reason);
  });
  m.def("default_features", [](const std::string &backend) { return feature_names(default_features(backend_from_name(backend))); });
  m.def("can_wait_on_other_workgroups", [](const std::string &backend, const std::vector<std::string> &features) {
    Target t;
    t.backend = backend_from_name(backend);
    t.features = features_from_names(features);
    return t.can_wait_on_other_workgroups();
  });
  m.def("compile_features", [](const std::string &backend) { return feature_names(compile_features(backend_from_name(backend))); });
}

// Text artefacts become str; binary ones (SPIR-V) bytes.
py::dict artifacts_to_python(const std::map<std::string, std::string> &artifacts) {
  py::dict d;
  for (auto &[name, data] : artifacts) {
    if (name == "spirv") d[py::str(name)] = py::bytes(data);
    else d[py::str(name)] = py::str(data);
  }
  return d;
}

// The device capabilities of a Vulkan runtime, by name (qd.vulkan_caps()).
py::dict vulkan_caps_dict(const Runtime &r) {
  const vulkan::DeviceCaps *caps = vulkan_caps(r);
  if (!caps) throw RuntimeError("device capabilities are only known for arch=qd.vulkan");
  py::dict d;
  for (auto &[name, value] : vulkan::caps_list(*caps))
    std::visit([&](const auto &v) { d[py::str(name)] = py::cast(v); }, value);
  return d;
}

void bind_runtime(py::module_ &m) {
  py::class_<CompiledKernel, std::shared_ptr<CompiledKernel>>(m, "CompiledKernel")
      .def_property_readonly("artifacts", [](const CompiledKernel &k) { return artifacts_to_python(k.artifacts); })
      .def_readonly("returns", &CompiledKernel::returns)
      .def_readonly("num_tasks", &CompiledKernel::num_tasks)
      .def_readonly("error_slot", &CompiledKernel::error_slot)
      .def_readonly("error_messages", &CompiledKernel::error_messages)
      .def_property_readonly("num_buffers", [](const CompiledKernel &k) { return k.buffers.size(); })
      .def("shape_slot", [](const CompiledKernel &k, int b) { return k.buffers.at(b).shape_arg_slot; });

  py::class_<Runtime>(m, "Runtime")
      .def(py::init([](const std::string &arch, int threads, std::vector<std::string> disabled, std::string device,
                       bool fast_math, bool subgroup_aggregation, bool constant_folding, int64_t cuda_stack_limit,
                       bool interleave_iterations) {
             RuntimeOptions o{threads, caps_from_names(disabled), std::move(device), fast_math, subgroup_aggregation,
                              constant_folding, cuda_stack_limit, interleave_iterations};
             return create_runtime(backend_from_name(arch), o);
           }),
           py::arg("arch"), py::arg("threads"), py::arg("disabled"), py::arg("device"), py::arg("fast_math") = false,
           py::arg("subgroup_aggregation") = true, py::arg("constant_folding") = true, py::arg("cuda_stack_limit") = 0,
           py::arg("interleave_iterations") = true)
      .def_property_readonly("features", [](Runtime &r) { return feature_names(r.features()); })
      .def_property_readonly("vulkan_caps", &vulkan_caps_dict)
      .def("allocate", &Runtime::allocate)
      .def("deallocate", &Runtime::deallocate)
      .def("write", [](Runtime &r, uint64_t h, size_t off, py::buffer data) {
        py::buffer_info info = data.request();
        r.write(h, off, info.ptr, info.size * info.itemsize);
      })
      .def("read", [](Runtime &r, uint64_t h, size_t off, py::buffer out) {
        py::buffer_info info = out.request(true);
        r.read(h, off, info.ptr, info.size * info.itemsize);
      })
      .def("fill", &Runtime::fill)
      .def("compile", [](Runtime &r, Builder &b) { return r.compile(b.finish()); })
      .def("set_offline_cache", &Runtime::set_offline_cache)
      .def("offline_cache_stats", &Runtime::offline_cache_stats)
      .def("flush_offline_cache", &Runtime::flush_offline_cache)
      .def("launch", &Runtime::launch, py::call_guard<py::gil_scoped_release>())
      .def("sync", &Runtime::sync, py::call_guard<py::gil_scoped_release>());

  m.def(
      "compile_artifacts",
      [](Builder &b, const std::string &arch, std::vector<std::string> features, bool fast_math) {
        Target target{backend_from_name(arch), features_from_names(features), fast_math};
        target.features.fast_math = fast_math;  // the LLVM targets read it there
        return artifacts_to_python(compile_artifacts(b.finish(), target));
      },
      py::arg("builder"), py::arg("arch"), py::arg("features"), py::arg("fast_math") = false);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Quadrants' C++ core: IR builder, passes, codegen and runtimes";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CompileError &e) {
      translate_compile_error(e);
    } catch (const RuntimeError &e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  bind_atomics(m);  // first: the builder's defaults are MemoryOrder / MemScope values
  bind_ir(m);
  bind_runtime(m);
}
