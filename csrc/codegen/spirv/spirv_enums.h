#pragma once
// The SPIR-V enumerants the builder and the codegen use, from the SPIR-V 1.6 unified spec.
// Kept here (rather than taken from SPIRV-Headers) so the core needs no extra package; the
// values are checked against the official header by the tests when it is installed.
#include <cstdint>

namespace qd::spirv {

enum class Op : uint32_t {
  Nop = 0, Undef = 1, Source = 3, Name = 5, MemberName = 6, Extension = 10,
  ExtInstImport = 11, ExtInst = 12, MemoryModel = 14, EntryPoint = 15, ExecutionMode = 16,
  Capability = 17, TypeVoid = 19, TypeBool = 20, TypeInt = 21, TypeFloat = 22,
  TypeVector = 23, TypeArray = 28, TypeRuntimeArray = 29, TypeStruct = 30,
  TypePointer = 32, TypeFunction = 33, ConstantTrue = 41, ConstantFalse = 42,
  Constant = 43, ConstantComposite = 44, ConstantNull = 46, Function = 54,
  FunctionParameter = 55, FunctionEnd = 56, FunctionCall = 57, Variable = 59, Load = 61,
  Store = 62, AccessChain = 65, Decorate = 71, MemberDecorate = 72,
  VectorShuffle = 79, CompositeConstruct = 80, CompositeExtract = 81, CompositeInsert = 82,
  ConvertFToU = 109, ConvertFToS = 110, ConvertSToF = 111, ConvertUToF = 112,
  UConvert = 113, SConvert = 114, FConvert = 115, Bitcast = 124, SNegate = 126,
  FNegate = 127, IAdd = 128, FAdd = 129, ISub = 130, FSub = 131, IMul = 132, FMul = 133,
  UDiv = 134, SDiv = 135, FDiv = 136, UMod = 137, SRem = 138, SMod = 139, FRem = 140,
  FMod = 141, IsNan = 156, IsInf = 157, Any = 154, All = 155, LogicalEqual = 164,
  LogicalNotEqual = 165, LogicalOr = 166, LogicalAnd = 167, LogicalNot = 168, Select = 169,
  IEqual = 170, INotEqual = 171, UGreaterThan = 172, SGreaterThan = 173,
  UGreaterThanEqual = 174, SGreaterThanEqual = 175, ULessThan = 176, SLessThan = 177,
  ULessThanEqual = 178, SLessThanEqual = 179, FOrdEqual = 180, FUnordEqual = 181,
  FOrdNotEqual = 182, FUnordNotEqual = 183, FOrdLessThan = 184, FUnordLessThan = 185,
  FOrdGreaterThan = 186, FUnordGreaterThan = 187, FOrdLessThanEqual = 188,
  FUnordLessThanEqual = 189, FOrdGreaterThanEqual = 190, FUnordGreaterThanEqual = 191,
  ShiftRightLogical = 194, ShiftRightArithmetic = 195, ShiftLeftLogical = 196,
  BitwiseOr = 197, BitwiseXor = 198, BitwiseAnd = 199, Not = 200, BitReverse = 204,
  BitCount = 205, ControlBarrier = 224, MemoryBarrier = 225, AtomicLoad = 227,
  AtomicStore = 228, AtomicExchange = 229, AtomicCompareExchange = 230,
  AtomicIIncrement = 232, AtomicIDecrement = 233, AtomicIAdd = 234, AtomicISub = 235,
  AtomicSMin = 236, AtomicUMin = 237, AtomicSMax = 238, AtomicUMax = 239, AtomicAnd = 240,
  AtomicOr = 241, AtomicXor = 242, Phi = 245, LoopMerge = 246, SelectionMerge = 247,
  Label = 248, Branch = 249, BranchConditional = 250, Switch = 251, Return = 253,
  ReturnValue = 254, Unreachable = 255, GroupNonUniformElect = 333,
  GroupNonUniformAll = 334, GroupNonUniformAny = 335, GroupNonUniformBroadcast = 337,
  GroupNonUniformBroadcastFirst = 338, GroupNonUniformBallot = 339,
  GroupNonUniformShuffle = 345, GroupNonUniformShuffleXor = 346,
  GroupNonUniformShuffleUp = 347, GroupNonUniformShuffleDown = 348,
  GroupNonUniformIAdd = 349, GroupNonUniformFAdd = 350, GroupNonUniformIMul = 351,
  GroupNonUniformFMul = 352, GroupNonUniformSMin = 353, GroupNonUniformUMin = 354,
  GroupNonUniformFMin = 355, GroupNonUniformSMax = 356, GroupNonUniformUMax = 357,
  GroupNonUniformFMax = 358, GroupNonUniformBitwiseAnd = 359, GroupNonUniformBitwiseOr = 360,
  GroupNonUniformBitwiseXor = 361, AtomicFMinEXT = 5614, AtomicFMaxEXT = 5615,
  AtomicFAddEXT = 6035,
};

enum class Capability : uint32_t {
  Shader = 1, Float16 = 9, Float64 = 10, Int64 = 11, Int64Atomics = 12, Int16 = 22,
  Int8 = 39, GroupNonUniform = 61, GroupNonUniformVote = 62, GroupNonUniformArithmetic = 63,
  GroupNonUniformBallot = 64, GroupNonUniformShuffle = 65, GroupNonUniformShuffleRelative = 66,
  GroupNonUniformClustered = 67, GroupNonUniformQuad = 68, StorageBuffer16BitAccess = 4433,
  StorageBuffer8BitAccess = 4448, VulkanMemoryModel = 5345,
  VulkanMemoryModelDeviceScope = 5346, AtomicFloat32MinMaxEXT = 5612,
  AtomicFloat64MinMaxEXT = 5613, AtomicFloat16MinMaxEXT = 5616, AtomicFloat32AddEXT = 6033,
  AtomicFloat64AddEXT = 6034, AtomicFloat16AddEXT = 6095, SignedZeroInfNanPreserve = 4466,
};

enum class AddressingModel : uint32_t { Logical = 0 };
enum class MemoryModel : uint32_t { GLSL450 = 1, Vulkan = 3 };
enum class ExecutionModel : uint32_t { GLCompute = 5 };
enum class ExecutionMode : uint32_t { LocalSize = 17, SignedZeroInfNanPreserve = 4461 };

enum class StorageClass : uint32_t {
  UniformConstant = 0, Input = 1, Uniform = 2, Output = 3, Workgroup = 4,
  CrossWorkgroup = 5, Private = 6, Function = 7, PushConstant = 9, StorageBuffer = 12,
};

enum class Decoration : uint32_t {
  Block = 2, ArrayStride = 6, BuiltIn = 11, Restrict = 19, Aliased = 20, Volatile = 21,
  Coherent = 23, NonWritable = 24, NonReadable = 25, NoContraction = 42, Binding = 33, DescriptorSet = 34,
  Offset = 35,
};

enum class BuiltIn : uint32_t {
  NumWorkgroups = 24, WorkgroupSize = 25, WorkgroupId = 26, LocalInvocationId = 27,
  GlobalInvocationId = 28, LocalInvocationIndex = 29, SubgroupSize = 36,
  NumSubgroups = 38, SubgroupId = 40, SubgroupLocalInvocationId = 41,
};

enum class Scope : uint32_t {
  CrossDevice = 0, Device = 1, Workgroup = 2, Subgroup = 3, Invocation = 4, QueueFamily = 5,
};

// MemorySemantics is a bit mask, so these are plain constants.
namespace semantics {
constexpr uint32_t Relaxed = 0x0;
constexpr uint32_t Acquire = 0x2;
constexpr uint32_t Release = 0x4;
constexpr uint32_t AcquireRelease = 0x8;
constexpr uint32_t SequentiallyConsistent = 0x10;
constexpr uint32_t UniformMemory = 0x40;
constexpr uint32_t SubgroupMemory = 0x80;
constexpr uint32_t WorkgroupMemory = 0x100;
constexpr uint32_t ImageMemory = 0x800;
constexpr uint32_t MakeAvailable = 0x2000;
constexpr uint32_t MakeVisible = 0x4000;

// The semantics a module under the Vulkan memory model uses for `bits`: SequentiallyConsistent
// (which that model forbids) becomes `seq_cst_as`, and since the model separates ordering from
// availability and visibility, a release makes the invocation's earlier writes to the storage
// classes named available at the scope only with MakeAvailable, and an acquire makes available
// writes visible to it only with MakeVisible.
constexpr uint32_t vulkan_model(uint32_t bits, uint32_t seq_cst_as) {
  if (bits & SequentiallyConsistent) bits = (bits & ~SequentiallyConsistent) | seq_cst_as;
  if (bits & (UniformMemory | WorkgroupMemory | ImageMemory)) {
    if (bits & (Release | AcquireRelease)) bits |= MakeAvailable;
    if (bits & (Acquire | AcquireRelease)) bits |= MakeVisible;
  }
  return bits;
}
}  // namespace semantics

// MemoryAccess operand bits (OpLoad / OpStore).
namespace memory_access {
constexpr uint32_t None = 0x0;
constexpr uint32_t Volatile = 0x1;
constexpr uint32_t Aligned = 0x2;
constexpr uint32_t MakePointerAvailable = 0x8;
constexpr uint32_t MakePointerVisible = 0x10;
constexpr uint32_t NonPrivatePointer = 0x20;
}  // namespace memory_access

enum class GroupOperation : uint32_t { Reduce = 0, InclusiveScan = 1, ExclusiveScan = 2 };

// GLSL.std.450 extended instructions the codegen is likely to need.
enum class GLSLstd450 : uint32_t {
  Round = 1, RoundEven = 2, Trunc = 3, FAbs = 4, SAbs = 5, FSign = 6, SSign = 7, Floor = 8,
  Ceil = 9, Fract = 10, Sin = 13, Cos = 14, Tan = 15, Asin = 16, Acos = 17, Atan = 18,
  Tanh = 21, Atan2 = 25, Pow = 26, Exp = 27, Log = 28, Exp2 = 29, Log2 = 30, Sqrt = 31,
  InverseSqrt = 32, FMin = 37, UMin = 38, SMin = 39, FMax = 40, UMax = 41, SMax = 42,
  FClamp = 43, UClamp = 44, SClamp = 45, Fma = 50, Ldexp = 53, FindILsb = 73, FindSMsb = 74,
  FindUMsb = 75, NMin = 79, NMax = 80, NClamp = 81,
};

}  // namespace qd::spirv
