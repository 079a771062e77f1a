"""The kernel: the value types every layer of the daemon shares.

Messages and their blocks (`messages`), core events and the `Terminal` a query ends with
(`events`), the model's stream and the model seam (`stream`), and the Tool interface with
tool results (`tools`). It imports only the standard library and msgspec, so every package
above may import it and it imports none of them.
"""
