"""The local test bed (stand-in server, private sshd, PKB configs) and the stress-search simulator."""
