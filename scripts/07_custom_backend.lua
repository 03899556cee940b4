-- 07_custom_backend.lua: Project 7 lives in scripts/07_custom_backend/ (the device in
-- my_device.lua, the lesson in main.lua). This runs the lesson, so that
-- ./run.sh scripts/07_custom_backend.lua works like the other projects.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
arg[0] = here .. "/07_custom_backend/main.lua"
dofile(arg[0])
