def route(arg: u64) -> u64:
    return arg

ROUTES = Table(
    keys={"ip.dst": "lpm"},
    actions=[route, DROP],
    size=16,
    default=DROP,
    entries=[("198.18.1.1/24", route, 2)],
)
