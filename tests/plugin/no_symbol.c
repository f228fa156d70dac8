/* A shared library that is not a moesim plugin (ctest plugin.no_symbol). */
__attribute__((visibility("default"))) int not_a_policy(void);
int not_a_policy(void) { return 1; }
