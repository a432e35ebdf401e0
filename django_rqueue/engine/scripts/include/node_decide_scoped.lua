-- node_decide_scoped(base, id, now): include/node_decide.lua, made only when called.
--
-- include/dep_settle.lua calls it only for an arrival that completes a waiting job; most
-- arrivals do not (every member of a chord but the last), and the closures of node_decide
-- and of its includes would be made on every one of them (include/notify_dependents.lua
-- says why): its includes are expanded inside this function.
-- Derived keys: those of include/node_decide.lua.
local function node_decide_scoped(base, id, now)
--@scope
--@include node_decide.lua
--@end-scope
  return node_decide(base, id, now)
end
