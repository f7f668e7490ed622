// The negative control of check.cmake's nm scan: one heap allocation through `new`,
// which links malloc, operator new and (for std::bad_alloc) the exception runtime.
int* volatile probe;

int main() {
  probe = new int(1);
  return *probe - 1;
}
