module timectl.test/gotimers

go 1.19
