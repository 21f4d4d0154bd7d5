# 函数式和对象式融合编程范式 (seed 004), 面向对象编程: a plain Python class (no framework,
# nothing changed). Added: the two calls at the end that use it.
class Sample: #class declaration
    def __init__(self, name): # class constructor (code)
        self.name = name # attribute (data)

    def set_name(self, name): # method declaration (code)
        self.name = name # method implementation (code)

sample = Sample("first")  # added
sample.set_name("second")  # added
