"""What callers of Cograph may send: the contract shared by the gateway and the services."""
