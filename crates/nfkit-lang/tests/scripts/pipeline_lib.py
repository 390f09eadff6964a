"""A pipeline whose routes table is declared in lib/routes.chain (imported
as R: its maps keep the library's names, ROUTES_lpm and ROUTES_default)."""
from lib.routes import ROUTES as R

seen = ArrayMap(u64, 2)

def count() -> u64:
    seen[0] += 1
    return 0

def routed() -> u64:
    seen[1] += 1
    return 0

pipeline(pre=count, tables=[R, routed], miss=DROP)
