T = Table(
    keys={"ip.dst": "lpm", "ip.src": "lpm"},
    actions=[DROP],
    size=16,
    default=DROP,
)
