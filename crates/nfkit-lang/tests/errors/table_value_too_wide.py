ACL = Table(keys={"ip.proto": "exact"}, actions=[DROP, PASS], size=8, default=PASS,
            entries=[(300, DROP)])
