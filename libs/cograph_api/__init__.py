"""What crosses a process boundary, defined once and imported by the services and the CLI.

limits (every request limit, the layer list), access_rules (who may read or write a
repository or collection, as SQL fragments over retrieval's tables), proto_json (protobuf
<-> the documented JSON), rest_models and rest_errors (REST request bodies and the error
shape), operations (what the MCP tools call), mcp_args (the MCP tools' argument models and
the input schemas generated from them), mcp_tools (the MCP server over those operations),
rest_client (the gateway's REST API from outside), embedder_client (the embedder's gRPC
API) and admin_keys (admin keys written into the gateway's key table).
"""
