return function(op, U)
end
