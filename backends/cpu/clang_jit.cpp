#include "backends/cpu/clang_jit.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Frontend/Utils.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace mg {

namespace {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

template <typename T> T check(llvm::Expected<T> v, const char* what) {
  if (!v) throw std::runtime_error(std::string(what) + ": " + llvm::toString(v.takeError()));
  if constexpr (std::is_reference_v<T>)
    return *v;
  else
    return std::move(*v);
}

} // namespace

std::string compile_c(const std::string& src, const std::vector<std::string>& flags) {
  init_llvm();
  std::string diag_text;
  llvm::raw_string_ostream diag_os(diag_text);
  auto diag_opts = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::TextDiagnosticPrinter printer(diag_os, diag_opts.get());
  auto diags =
      clang::CompilerInstance::createDiagnostics(diag_opts.get(), &printer, /*ShouldOwnClient=*/false);

  // The driver turns flags such as -march=native into the frontend's target settings; its path
  // only locates clang's resource directory, and the kernels include no headers.
  std::vector<const char*> args{"/usr/lib/llvm-15/bin/clang", "-c", "-x", "c", "kernel.c", "-o", "kernel.o"};
  for (auto& f : flags)
    args.push_back(f.c_str());
  clang::CreateInvocationOptions opts;
  opts.Diags = diags;
  std::shared_ptr<clang::CompilerInvocation> inv = clang::createInvocation(args, opts);
  if (!inv) throw std::runtime_error("kernel compile failed: bad compiler flags:\n" + diag_text);
  // The driver asks the frontend not to free its AST and modules (a compiler process exits
  // anyway); in a process that compiles thousands of kernels that would be a leak per compile.
  inv->getFrontendOpts().DisableFree = false;
  inv->getCodeGenOpts().DisableFree = false;
  // clang's source manager takes the remapped buffer when it maps the file, and frees it.
  inv->getPreprocessorOpts().addRemappedFile("kernel.c", llvm::MemoryBuffer::getMemBufferCopy(src).release());

  clang::CompilerInstance ci;
  ci.setInvocation(std::move(inv));
  ci.setDiagnostics(diags.get());
  ci.setVerboseOutputStream(llvm::nulls()); // "1 error generated." would go to stderr
  llvm::SmallVector<char, 0> object;
  ci.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
  llvm::LLVMContext ctx;
  clang::EmitObjAction act(&ctx);
  if (!ci.ExecuteAction(act) || diags->hasErrorOccurred() || object.empty())
    throw std::runtime_error("kernel compile failed (clang 15, in process):\n" + diag_text);
  return std::string(object.data(), object.size());
}

namespace {

// Parses, verifies and optimizes (O2, for the host CPU) the IR; returns the module and the target
// machine that will emit it.
std::pair<std::unique_ptr<llvm::Module>, std::unique_ptr<llvm::TargetMachine>>
optimized(const std::string& ir, llvm::LLVMContext& ctx) {
  init_llvm();
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(ir, err, ctx);
  if (!m) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    err.print("kernel.ll", os);
    throw std::runtime_error("LLVM IR did not parse:\n" + os.str());
  }
  std::string verify;
  llvm::raw_string_ostream vos(verify);
  if (llvm::verifyModule(*m, &vos)) throw std::runtime_error("LLVM IR is not valid:\n" + vos.str());
  std::string triple = llvm::sys::getProcessTriple(), error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) throw std::runtime_error("no LLVM target for " + triple + ": " + error);
  std::string features;
  llvm::StringMap<bool> host;
  if (llvm::sys::getHostCPUFeatures(host))
    for (auto& f : host)
      features += (features.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
  llvm::TargetOptions to;
  to.UnsafeFPMath = false;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, llvm::sys::getHostCPUName(), features, to, llvm::Reloc::PIC_,
                                  llvm::None, llvm::CodeGenOpt::Aggressive));
  m->setTargetTriple(triple);
  m->setDataLayout(tm->createDataLayout());
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions tuning; // as clang and opt at -O2: the SLP vectorizer is off by default
    tuning.SLPVectorization = true;
    tuning.LoopVectorization = true;
    llvm::PassBuilder pb(tm.get(), tuning);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(*m, mam);
  }
  return {std::move(m), std::move(tm)};
}

} // namespace

std::string optimize_ir(const std::string& ir) {
  llvm::LLVMContext ctx;
  auto [m, tm] = optimized(ir, ctx);
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

std::string compile_ir(const std::string& ir) {
  llvm::LLVMContext ctx;
  auto [m, tm] = optimized(ir, ctx);
  std::string triple = m->getTargetTriple();
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
    throw std::runtime_error("LLVM cannot emit an object file for " + triple);
  pm.run(*m);
  return std::string(object.data(), object.size());
}

std::string host_cpu_id() {
  std::string id = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> features;
  if (llvm::sys::getHostCPUFeatures(features)) {
    std::vector<std::string> on;
    for (auto& f : features)
      if (f.second) on.push_back(f.first().str());
    std::sort(on.begin(), on.end()); // StringMap order is not stable across runs
    for (auto& f : on)
      id += "," + f;
  }
  return id;
}

struct ObjectLinker::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex m;
  int next = 0;
  std::unordered_map<int, llvm::orc::JITDylib*> libraries;
  void remove(int id) {
    auto it = libraries.find(id);
    if (it == libraries.end()) return;
    llvm::consumeError(jit->getExecutionSession().removeJITDylib(*it->second)); // best effort
    libraries.erase(it);
  }
  std::string reported; // errors the session reports (a failed link) rather than returns
};

ObjectLinker::ObjectLinker() : impl_(std::make_unique<Impl>()) {
  init_llvm();
  impl_->jit = check(llvm::orc::LLJITBuilder().create(), "cannot start the JIT");
  impl_->jit->getExecutionSession().setErrorReporter(
      [impl = impl_.get()](llvm::Error e) { impl->reported += llvm::toString(std::move(e)) + "\n"; });
}

ObjectLinker::~ObjectLinker() = default;

ObjectLinker::Loaded ObjectLinker::load(const std::string& object, const std::string& symbol) {
  std::lock_guard<std::mutex> lk(impl_->m);
  impl_->reported.clear();
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(object, "kernel.o");
  // Parse it first: a damaged object must be an error here, not a failure deep in the linker.
  check(llvm::object::ObjectFile::createObjectFile(buf->getMemBufferRef()), "not a valid object file");
  auto& jit = *impl_->jit;
  int id = impl_->next++;
  llvm::orc::JITDylib& jd =
      check(jit.createJITDylib("kernel" + std::to_string(id)), "cannot create a JIT library");
  impl_->libraries[id] = &jd;
  // The kernels call libm (expf, sinf, ...) from this process.
  auto gen =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit.getDataLayout().getGlobalPrefix());
  if (!gen) {
    impl_->remove(id);
    throw std::runtime_error("cannot search this process for symbols: " + llvm::toString(gen.takeError()));
  }
  jd.addGenerator(std::move(*gen));
  if (llvm::Error e = jit.addObjectFile(jd, std::move(buf))) {
    impl_->remove(id);
    throw std::runtime_error("cannot link kernel: " + llvm::toString(std::move(e)));
  }
  auto addr = jit.lookup(jd, symbol);
  if (!addr) {
    std::string msg = llvm::toString(addr.takeError());
    impl_->remove(id);
    throw std::runtime_error("cannot link kernel " + symbol + ": " + msg + "\n" + impl_->reported);
  }
  return {addr->toPtr<void*>(), id};
}

void ObjectLinker::unload(int library) {
  std::lock_guard<std::mutex> lk(impl_->m);
  impl_->remove(library);
}

} // namespace mg
