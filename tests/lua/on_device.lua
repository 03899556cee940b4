-- Runs a Lua test file with another default device: moongrad tests/lua/on_device.lua CL tests/lua/test_nn.lua
-- A device that cannot run here prints why with SKIPPED: (CTest reports the test as skipped).
local device, file = arg[1], arg[2]
local names, why = Device.names()
local known = false
for _, n in ipairs(names) do known = known or n == device end
if not known then error(("on_device: %s is not compiled in (known: %s)"):format(device, table.concat(names, ", ")), 0) end
if why[device] then
  print(("SKIPPED: %s cannot run here: %s"):format(device, why[device]))
  return
end
Device.DEFAULT = device
arg = { [0] = file, table.unpack(arg, 3) }
dofile(file)
