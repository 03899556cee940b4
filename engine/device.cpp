#include "engine/device.h"

#include <algorithm>

#include <map>
#include <stdexcept>
#include <unordered_map>

#include "engine/counters.h"
#include "engine/settings.h"

namespace mg {

GlobalCounters& global_counters() {
  static GlobalCounters g;
  return g;
}

namespace {
struct Registry {
  std::map<std::string, DeviceFactory> factories;
  std::map<std::string, std::unique_ptr<Device>> live;
  // freed memory by (device, bytes), handed to the next buffer of the same size
  std::map<std::pair<std::string, size_t>, std::vector<void*>> free_list;
};
Registry& reg() {
  static Registry* r = new Registry(); // leaked on purpose: buffers may die after static destructors
  return *r;
}
int next_buffer_id = 0;
std::function<void(size_t, AllocEvent)> alloc_hook;
} // namespace

void set_alloc_hook(std::function<void(size_t, AllocEvent)> hook) { alloc_hook = std::move(hook); }

namespace {
int& grad_buffer_count() {
  static int n = 0;
  return n;
}
} // namespace

int Buffer::buffers_requiring_grad() { return grad_buffer_count(); }
void Buffer::add_requires_grad(int delta) {
  int before = requires_grad_;
  requires_grad_ = std::max(0, requires_grad_ + delta);
  grad_buffer_count() += (requires_grad_ > 0) - (before > 0);
}

// "CPU:0" is "CPU": each device's first instance goes by its plain name, so that tensors made on
// "CPU" and on "CPU:0" meet in one kernel.
std::string canonical_device(std::string name) {
  if (name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0) name.resize(name.size() - 2);
  return name;
}

Buffer::Buffer(std::string device, DType dtype, size_t size)
    : device(canonical_device(std::move(device))), dtype(dtype), size(size), id_(next_buffer_id++) {}

Buffer::~Buffer() {
  if (requires_grad_ > 0) grad_buffer_count()--;
  if (ptr_) reg().free_list[{device, nbytes()}].push_back(ptr_);
}

void* Buffer::ptr() {
  if (!ptr_) {
    auto& fl = reg().free_list[{device, nbytes()}]; // map nodes stay put: the hook may add to fl
    if (alloc_hook) {
      alloc_hook(nbytes(), fl.empty() ? AllocEvent::miss : AllocEvent::reuse);
      if (fl.empty()) alloc_hook(nbytes(), AllocEvent::fresh);
    }
    if (!fl.empty()) {
      ptr_ = fl.back();
      fl.pop_back();
    } else {
      ptr_ = get_device(device).alloc(nbytes() ? nbytes() : 1);
      global_counters().mem_used += static_cast<int64_t>(nbytes());
    }
  }
  return ptr_;
}
void Buffer::copyin(const void* src) {
  from_host_ = true;
  get_device(device).copyin(ptr(), src, nbytes());
}
int Buffer::next_id() { return next_buffer_id; }
void Buffer::copyout(void* dst) { get_device(device).copyout(dst, ptr(), nbytes()); }

size_t buffer_size(const Buffer& b) { return b.size; }
std::string buffer_string(const Buffer& b) {
  return "<buf#" + std::to_string(b.id()) + " " + b.device + " " + name(b.dtype) + " " +
         std::to_string(b.size) + ">";
}

bool register_device(const std::string& name, DeviceFactory f) {
  reg().factories[name] = std::move(f);
  return true;
}

Device& get_device(const std::string& full) {
  auto& r = reg();
  std::string name = canonical_device(full);
  if (auto it = r.live.find(name); it != r.live.end()) return *it->second;
  auto f = r.factories.find(name);
  // "CPU:1", "CL:2": another instance of that device, with its own buffers and compiled kernels
  if (size_t colon = name.rfind(':'); f == r.factories.end() && colon != std::string::npos &&
                                      colon + 1 < name.size() &&
                                      name.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    f = r.factories.find(name.substr(0, colon));
  if (f == r.factories.end()) {
    std::string known;
    for (auto& [k, v] : r.factories)
      known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument("unknown device '" + full + "' (known: " + known +
                                "; an index picks another instance: CPU:1)");
  }
  return *(r.live[name] = f->second());
}

std::vector<std::string> device_names() {
  std::vector<std::string> r;
  for (auto& [k, v] : reg().factories)
    r.push_back(k);
  return r;
}

Device& check_runnable(const std::string& name) {
  Device& d = get_device(name);
  if (std::string why = d.unavailable(); !why.empty())
    throw std::invalid_argument("device " + name + " cannot run here: " + why);
  return d;
}

std::string default_device() { return settings().device; }

} // namespace mg
