-- notify_dependents(base, items, now): include/dep_notify.lua, made only when called.
--
-- Redis runs a script's whole chunk on every call, and each `local function` in it is a
-- closure made on each run: the dependency code (dep_notify and the helpers it needs)
-- would cost every ack, failure and expiry of a job without dependents a dozen of them.
-- The transitions a plain job goes through call this instead, only when the job's 'nx'
-- field says it has dependents: the includes between the scope lines are expanded inside
-- this function (engine/scripts/__init__.py), so their closures are made only then.
-- Derived keys: those of include/dep_notify.lua.
local function notify_dependents(base, items, now)
--@scope
--@include dep_notify.lua
--@end-scope
  return dep_notify(base, items, now)
end
