-- wrk script: POST one KServe v2 JSON infer request for model `identity` (FP32[16]).
--   wrk -t1 -c4 -d8s -s benches/peers/wrk-post.lua http://127.0.0.1:18090/v2/models/identity/infer
-- With WRK_ID set in the environment the body starts with an "id" (the nginx Lua handler then
-- echoes it); without it the body has none, as perf_analyzer's sync mode sends.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local data = "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]"
local id = ""
if os.getenv("WRK_ID") then id = '"id":"1",' end
wrk.body = "{" .. id .. '"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[16],"data":' .. data .. "}]}"
