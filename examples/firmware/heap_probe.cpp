// The negative control of check.cmake's nm scan, built with -fexceptions: one `new`
// (operator new, malloc, _sbrk) and one `throw` (__cxa_throw, the unwinder). The scan
// must find them here, or its pass on the real image proves nothing.
int* volatile probe;

int main() {
  probe = new int(1);
  if (*probe != 1) throw *probe;
  return 0;
}
