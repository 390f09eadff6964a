ACL = Table(
    keys={"ip.src": "ternary", "l4.dport": "ternary"},
    actions=[DROP, NoAction],
    size=8,
    default=NoAction,
    entries=[(("198.18.0.0/16",), DROP)],
)
