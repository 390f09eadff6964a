def route(arg: u64) -> u64:
    return arg

ROUTES = Table(keys={"ip.dest": "lpm"}, actions=[route, DROP], size=16, default=DROP)
