def main() -> u64:
    return Packet.payload
