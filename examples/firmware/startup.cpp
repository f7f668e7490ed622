// examples/firmware/startup.cpp: the Cortex-M7 vector table and reset handler of the
// bare-metal image, in place of newlib's crt0 (which sets the heap up through
// semihosting). Reset: enable the FPU, copy .data from flash, zero .bss, run static
// constructors, call main, report main's return value as the exit code. A fault exits
// with code 2 and abort() or a failed assert() with code 3, each after a FAIL line, so
// a run never hangs.
//
// abort() and __assert_func() are defined here, as a bare-metal image must: newlib's
// abort() raises SIGABRT through a signal table it allocates with malloc, and its
// __assert_func() prints with fiprintf, whose stdio buffers come from malloc. Both are
// reachable from hedge code through libstdc++: std::to_chars(double) asserts (route's
// explain() formats scores with it), and std::string_view::substr calls
// std::__throw_out_of_range_fmt, which calls abort() under -fno-exceptions.
#include <cstddef>
#include <cstdint>

#include "console.hpp"

extern "C" {
extern std::uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[], __stack_top[];
extern void (*__preinit_array_start[])(), (*__preinit_array_end[])();
extern void (*__init_array_start[])(), (*__init_array_end[])();
int main();
[[noreturn]] void abort();
[[noreturn]] void __assert_func(const char* file, int line, const char* function, const char* condition);
[[noreturn]] void reset_handler();
[[noreturn]] void fault_handler();
[[noreturn]] void start_after_reset();
}

namespace {

using handler = void (*)();

/// The ARMv7-M vector table: initial stack pointer, then the 15 system exception
/// handlers (reset, NMI, HardFault, MemManage, BusFault, UsageFault, 4 reserved, SVCall,
/// DebugMonitor, reserved, PendSV, SysTick). The image uses no interrupts.
struct vector_table {
  const void* initial_stack;
  handler system[15];
};

[[gnu::used, gnu::section(".vectors")]] const vector_table vectors = {
    __stack_top,
    {reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler, nullptr, nullptr,
     nullptr, nullptr, fault_handler, fault_handler, nullptr, fault_handler, fault_handler}};

}  // namespace

// Naked: the FPU (coprocessors CP10 and CP11 in CPACR, ARMv7-M ARM B3.2.20) must be
// enabled before any compiled code may touch a floating-point register.
extern "C" [[gnu::naked]] void reset_handler() {
  asm volatile(
      "ldr r0, =0xE000ED88\n"
      "ldr r1, [r0]\n"
      "orr r1, r1, #0x00F00000\n"
      "str r1, [r0]\n"
      "dsb\n"
      "isb\n"
      "b start_after_reset\n");
}

extern "C" void start_after_reset() {
  for (std::uint32_t *from = __data_load, *to = __data_start; to < __data_end;) *to++ = *from++;
  for (std::uint32_t* to = __bss_start; to < __bss_end;) *to++ = 0;
  for (auto* f = __preinit_array_start; f < __preinit_array_end; ++f) (*f)();
  for (auto* f = __init_array_start; f < __init_array_end; ++f) (*f)();
  firmware::exit(main());
}

extern "C" void fault_handler() {
  std::uint32_t exception;
  asm volatile("mrs %0, ipsr" : "=r"(exception));
  firmware::line out;
  (out << "FAIL: fault, exception " << std::size_t{exception & 0x1FF}).end();
  firmware::exit(2);
}

extern "C" void abort() {
  firmware::write("FAIL: abort()\n");
  firmware::exit(3);
}

extern "C" void __assert_func(const char* file, int line, const char*, const char* condition) {
  firmware::line out;
  (out << "FAIL: assert(" << condition << ") at " << file << ":" << std::size_t(line)).end();
  firmware::exit(3);
}
