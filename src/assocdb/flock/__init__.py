"""flock: FlockDB's Thrift interface over a Graph (`assocdb serve-thrift`).

Clients written for FlockDB talk to assocdb unchanged: `Flockdb.thrift`
(FlockDB's published interface, method for method and field id for field
id) over framed transport and the binary protocol, on port 7915. The floor
is a thin, stateless shell like the HTTP server: FlockDB's cursors are
positions and ids, so nothing about a client is kept between calls.

* `graphs.py`   FlockDB graph ids → association types (a table, or type ids)
* `paging.py`   FlockDB's result window (cursors -1 / 0 / ±position), pure
* `select.py`   select, select_edges and count: RPN programs → queries, pages
* `execute.py`  execute: edge and whole-node operations, priorities
* `service.py`  the handler of every method, errors → FlockException
* `server.py`   the thriftpy2 server (the `thrift` extra)

docs/api.md ("FlockDB's Thrift interface") says where answers can differ.
"""
