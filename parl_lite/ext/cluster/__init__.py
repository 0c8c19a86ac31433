"""The cluster: ``parl-lite start / connect / status / stop`` and ``parl_lite.connect("host:port")``.

Modules: :mod:`wire` (authentication, version hello), :mod:`framing` (messages and their pickles),
:mod:`hello` (the fields each role's hello must hold), :mod:`limits` (the bounds, their defaults and
variables), :mod:`server` (the accept loop and the handshakes), :mod:`master` (nodes, placement,
status), :mod:`node` (hosts actors in a LocalPool), :mod:`actor_host` (serves one actor to its
client, in a node's worker),
:mod:`client` (the ``Backend`` the user's program uses), :mod:`channel` (one actor, as its caller
sees it), :mod:`shipping` (the user's files), :mod:`local_state` (the token and the processes this
machine started), :mod:`commands` (the click commands).
"""
