N = foo() + 1
