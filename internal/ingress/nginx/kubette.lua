-- kubette ingress: endpoints change without a reload.
--
-- The endpoints of every backend live in the shared dict kubette_backends
-- (backend name -> "host:port host:port ..."). The controller replaces the
-- whole set through the control socket (PUT /kubette/backends); the backends
-- file is loaded again when nginx starts or reloads. A request is checked in
-- the access phase (503 without endpoints) and its peer is picked round robin
-- in balancer_by_lua; a retry (proxy_next_upstream) takes the following peers.
local balancer = require "ngx.balancer"

local M = {}
local dict = ngx.shared.kubette_backends
-- This worker's parsed peer lists: name -> { raw = dict value, peers = {{host, port}...}, next = index }.
local cache = {}

local function parse_peers(raw)
    local peers = {}
    for hp in string.gmatch(raw, "%S+") do
        local host, port = string.match(hp, "^(.+):(%d+)$")
        if host then
            peers[#peers + 1] = { host, tonumber(port) }
        end
    end
    return peers
end

local function peers_of(name)
    local raw = dict:get(name)
    if raw == nil then
        cache[name] = nil
        return nil
    end
    local c = cache[name]
    if c == nil or c.raw ~= raw then
        local peers = parse_peers(raw)
        local first = 1
        if #peers > 1 then
            first = math.random(#peers)
        end
        c = { raw = raw, peers = peers, next = first }
        cache[name] = c
    end
    return c
end

-- load replaces the content of the dict with the backends of text: one line
-- per backend, its name then its endpoints, separated by spaces. Backends
-- missing from text are deleted after the others were stored, so a backend
-- present before and after never disappears. It returns the number of
-- backends, or nil and an error.
function M.load(text)
    local seen = {}
    local n = 0
    for line in string.gmatch(text, "[^\n]+") do
        local name, rest = string.match(line, "^(%S+)%s*(.*)$")
        if name then
            local ok, err = dict:safe_set(name, rest)
            if not ok then
                return nil, "store backend " .. name .. ": " .. tostring(err)
            end
            seen[name] = true
            n = n + 1
        end
    end
    for _, k in ipairs(dict:get_keys(0)) do
        if not seen[k] then
            dict:delete(k)
        end
    end
    return n
end

-- load_file loads the backends file (when nginx starts or reloads).
function M.load_file(path)
    local f = io.open(path, "r")
    if f == nil then
        return
    end
    local text = f:read("*a")
    f:close()
    local n, err = M.load(text or "")
    if n == nil then
        ngx.log(ngx.ERR, "kubette: load ", path, ": ", err)
    end
end

-- access answers 503 when the backend has no endpoints.
function M.access(name)
    local c = peers_of(name)
    if c == nil or #c.peers == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
end

-- balance sets the peer of this try.
function M.balance(name)
    local c = peers_of(name)
    if c == nil or #c.peers == 0 then
        ngx.log(ngx.WARN, "kubette: backend ", name, " has no endpoints")
        return ngx.exit(ngx.ERROR)
    end
    local n = #c.peers
    local ctx = ngx.ctx
    local i
    if ctx.kubette_first == nil then
        i = c.next
        if i > n then
            i = 1
        end
        c.next = i % n + 1
        ctx.kubette_first, ctx.kubette_tries = i, 0
        if n > 1 then
            balancer.set_more_tries(n - 1)
        end
    else
        ctx.kubette_tries = ctx.kubette_tries + 1
        i = (ctx.kubette_first - 1 + ctx.kubette_tries) % n + 1
    end
    local p = c.peers[i]
    local ok, err = balancer.set_current_peer(p[1], p[2])
    if not ok then
        ngx.log(ngx.ERR, "kubette: set peer ", p[1], ":", p[2], " of ", name, ": ", err)
        return ngx.exit(ngx.ERROR)
    end
end

-- serve_backends handles PUT /kubette/backends on the control socket.
function M.serve_backends()
    if ngx.req.get_method() ~= "PUT" then
        return ngx.exit(ngx.HTTP_NOT_ALLOWED)
    end
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if body == nil then
        if ngx.req.get_body_file() ~= nil then
            ngx.status = ngx.HTTP_REQUEST_ENTITY_TOO_LARGE
            ngx.say("body larger than the buffer")
            return ngx.exit(ngx.HTTP_OK)
        end
        body = ""
    end
    local n, err = M.load(body)
    if n == nil then
        ngx.status = ngx.HTTP_INTERNAL_SERVER_ERROR
        ngx.say(err)
        return ngx.exit(ngx.HTTP_OK)
    end
    ngx.say("ok ", n)
end

-- serve_backend handles GET /kubette/backend?name=N: the stored endpoints.
function M.serve_backend()
    local name = ngx.var.arg_name
    local raw = name and dict:get(name)
    if raw == nil then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    ngx.say(raw)
end

return M
