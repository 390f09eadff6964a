/* Only .text: global functions (programs, as libbpf and the conformance
 * runner take them) and a static helper. */
static __attribute__((noinline)) int twice(int x)
{
	return x * 2;
}

int entry_one(int *p)
{
	return twice(*p) + 1;
}

int entry_two(int *p)
{
	return twice(p[1]) - 1;
}
